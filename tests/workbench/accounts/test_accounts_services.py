"""Team and membership services: admins manage members; a team keeps at least one admin."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from workbench.accounts import services
from workbench.accounts.models import Membership
from workbench.accounts.selectors import current_membership, role_for


def test_team_create_makes_the_creator_its_admin(make_user):
    user = make_user("founder")
    team = services.team_create(name="  gamma ", creator=user)
    assert team.name == "gamma"
    assert role_for(user=user, team=team) == "admin"


def test_team_create_makes_the_new_team_current_for_its_creator(member, team):
    created = services.team_create(name="gamma", creator=member)
    assert current_membership(user=member).team == created


def test_team_create_refuses_a_duplicate_name(make_user, team):
    with pytest.raises(ValidationError):
        services.team_create(name=team.name, creator=make_user("dup"))


def test_admin_changes_a_role(admin, member, team):
    membership = Membership.objects.get(user=member, team=team)
    services.membership_change_role(actor=admin, membership=membership, role="admin")
    assert role_for(user=member, team=team) == "admin"


def test_the_last_admin_cannot_demote_themselves(admin, team):
    membership = Membership.objects.get(user=admin, team=team)
    with pytest.raises(ValidationError):
        services.membership_change_role(actor=admin, membership=membership, role="member")


def test_the_last_admin_cannot_be_removed(admin, team):
    with pytest.raises(ValidationError):
        services.membership_remove(actor=admin, membership=Membership.objects.get(user=admin, team=team))


def test_admin_removes_a_member(admin, member, team):
    services.membership_remove(actor=admin, membership=Membership.objects.get(user=member, team=team))
    assert role_for(user=member, team=team) is None


def test_an_admin_of_another_team_cannot_touch_this_teams_members(make_user, other_team, member, team):
    foreign_admin = make_user("foreign", other_team, "admin")
    with pytest.raises(PermissionDenied):
        services.membership_remove(
            actor=foreign_admin, membership=Membership.objects.get(user=member, team=team)
        )
