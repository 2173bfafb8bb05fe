"""Writes about teams and memberships; member management is for team admins only."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from workbench.accounts.access import require_role
from workbench.accounts.models import Membership, Role, Team


@transaction.atomic
def team_create(*, name: str, creator) -> Team:
    """A new team whose creator is its first admin."""
    team = Team(name=name.strip())
    team.full_clean()
    team.save()
    Membership.objects.create(user=creator, team=team, role=Role.ADMIN)
    return team


def membership_add(*, actor, team: Team, username: str, role: str = Role.MEMBER) -> Membership:
    require_role(user=actor, team=team, min_role=Role.ADMIN)
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise ValidationError({"username": f"No user named {username!r}."})
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"username": f"{user.username} is already in {team}."})
    membership = Membership(team=team, user=user, role=role)
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def membership_change_role(*, actor, membership: Membership, role: str) -> Membership:
    require_role(user=actor, team=membership.team_id, min_role=Role.ADMIN)
    if membership.role == Role.ADMIN and role != Role.ADMIN:
        _ensure_another_admin(membership)
    membership.role = role
    membership.full_clean()
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, actor, membership: Membership) -> None:
    require_role(user=actor, team=membership.team_id, min_role=Role.ADMIN)
    if membership.role == Role.ADMIN:
        _ensure_another_admin(membership)
    membership.delete()


def _ensure_another_admin(membership: Membership) -> None:
    # Lock the team's admin rows so two admins cannot demote each other at the same time.
    admins = Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.ADMIN)
    if not admins.exclude(pk=membership.pk).exists():
        raise ValidationError("A team keeps at least one admin.")
