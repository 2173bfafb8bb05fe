"""The access layer: rows of another team do not exist (404); too low a role is refused (403)."""

import uuid

import pytest
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404

from workbench.accounts.access import (
    TeamScopedFormMixin,
    get_scoped_or_404,
    require_role,
    team_id_of,
    team_queryset,
)
from workbench.accounts.models import Membership, Team
from workbench.jobs.models import JobProgress


@pytest.fixture
def job(team):
    return JobProgress.objects.create(team=team, kind="demo")


@pytest.fixture
def other_job(other_team):
    return JobProgress.objects.create(team=other_team, kind="demo")


class JobPickForm(TeamScopedFormMixin, forms.Form):
    job = forms.ModelChoiceField(queryset=JobProgress.objects.all())


def test_team_queryset_keeps_only_the_users_teams_rows(member, job, other_job):
    assert list(team_queryset(JobProgress, member)) == [job]


def test_team_queryset_with_min_role_drops_teams_where_the_role_is_lower(viewer, job):
    assert list(team_queryset(JobProgress, viewer, min_role="member")) == []
    assert list(team_queryset(JobProgress, viewer)) == [job]


def test_team_queryset_is_empty_for_anonymous_users(job):
    assert list(team_queryset(JobProgress, AnonymousUser())) == []


def test_team_queryset_scopes_teams_themselves(member, team, other_team):
    assert list(team_queryset(Team, member)) == [team]


def test_get_scoped_or_404_hides_another_teams_object(outsider, job):
    with pytest.raises(Http404):
        get_scoped_or_404(JobProgress, outsider, job.pk)


def test_get_scoped_or_404_refuses_a_too_low_role_with_403(viewer, job):
    with pytest.raises(PermissionDenied):
        get_scoped_or_404(JobProgress, viewer, job.pk, min_role="member")


def test_get_scoped_or_404_returns_the_object_for_a_sufficient_role(member, job):
    assert get_scoped_or_404(JobProgress.objects.all(), member, job.pk, min_role="member") == job


@pytest.mark.parametrize("bad_pk", ["not-a-uuid", None, uuid.UUID("6f1c2a52-3d3b-4c1e-9a57-0b8e2f7d4c10")])
def test_get_scoped_or_404_answers_404_for_malformed_or_unknown_ids(member, bad_pk):
    with pytest.raises(Http404):
        get_scoped_or_404(JobProgress, member, bad_pk)


def test_team_id_of_follows_the_team_field(job, team):
    membership = Membership(team=team, role="viewer")
    assert (team_id_of(job), team_id_of(membership), team_id_of(team)) == (team.pk, team.pk, team.pk)


def test_require_role_orders_roles(admin, team):
    assert require_role(user=admin, team=team, min_role="member") == "admin"


def test_scoped_form_rejects_another_teams_row_posted_by_id(member, other_job):
    form = JobPickForm(data={"job": str(other_job.pk)}, user=member)
    assert not form.is_valid()
    assert "job" in form.errors


def test_scoped_form_accepts_and_offers_only_own_rows(member, job, other_job):
    form = JobPickForm(data={"job": str(job.pk)}, user=member)
    assert form.is_valid(), form.errors
    assert list(form.fields["job"].queryset) == [job]


def test_scoped_form_pinned_to_a_team_offers_only_that_teams_rows(
    make_user, team, other_team, job, other_job
):
    both = make_user("bo", team, "member")
    Membership.objects.create(user=both, team=other_team, role="member")
    form = JobPickForm(user=both, team=other_team)
    assert list(form.fields["job"].queryset) == [other_job]
