"""Team and membership services: admins manage members; a team keeps at least one admin."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from workbench.accounts import services
from workbench.accounts.models import Membership
from workbench.accounts.selectors import role_for, teams_for_user


def test_team_create_makes_the_creator_its_admin(make_user):
    user = make_user("founder")
    team = services.team_create(name="  gamma ", creator=user)
    assert team.name == "gamma"
    assert role_for(user=user, team=team) == "admin"


def test_team_create_refuses_a_duplicate_name(make_user, team):
    with pytest.raises(ValidationError):
        services.team_create(name=team.name, creator=make_user("dup"))


def test_admin_adds_a_member_with_a_role(admin, team, make_user):
    newcomer = make_user("newcomer")
    services.membership_add(actor=admin, team=team, username="newcomer", role="viewer")
    assert role_for(user=newcomer, team=team) == "viewer"
    assert list(teams_for_user(user=newcomer)) == [team]


def test_a_member_cannot_add_members(member, team, make_user):
    make_user("newcomer")
    with pytest.raises(PermissionDenied):
        services.membership_add(actor=member, team=team, username="newcomer")


def test_adding_an_unknown_user_is_a_validation_error(admin, team):
    with pytest.raises(ValidationError):
        services.membership_add(actor=admin, team=team, username="nobody")


def test_adding_someone_twice_is_a_validation_error(admin, member, team):
    with pytest.raises(ValidationError):
        services.membership_add(actor=admin, team=team, username=member.username)


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
