"""Writes about teams, invitations and memberships; member management is for team admins only."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from workbench.accounts.access import require_role
from workbench.accounts.models import Invitation, InvitationStatus, Membership, Role, Team


@transaction.atomic
def team_create(*, name: str, creator) -> Team:
    """A new team whose creator is its first admin; creating it makes it their current team."""
    team = Team(name=name.strip())
    team.full_clean()
    team.save()
    Membership.objects.create(user=creator, team=team, role=Role.ADMIN)
    current_team_choose(user=creator, team=team)
    return team


def invitation_create(*, actor, team: Team, username: str, role: str = Role.MEMBER) -> Invitation | None:
    """Invite the user named username to team with role (team admins only).

    Returns None, changing nothing, when no such user exists or they are already in the team; callers
    answer the same either way, so inviting does not tell which usernames exist. A pending invitation
    to the same person is updated to the new role instead of doubled.
    """
    require_role(user=actor, team=team, min_role=Role.ADMIN)
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    invitee = get_user_model().objects.filter(username=username.strip()).first()
    if invitee is None or Membership.objects.filter(team=team, user=invitee).exists():
        return None
    invitation, _ = Invitation.objects.update_or_create(
        team=team,
        invitee=invitee,
        status=InvitationStatus.PENDING,
        defaults={"role": role, "inviter": actor},
    )
    return invitation


@transaction.atomic
def invitation_accept(*, user, invitation_id: int) -> Membership:
    """The invitee joins the team with the invited role; their current team stays as it was."""
    invitation = _pending_invitation_for_update(user=user, invitation_id=invitation_id)
    membership, _ = Membership.objects.get_or_create(
        team_id=invitation.team_id, user=user, defaults={"role": invitation.role}
    )
    _respond(invitation, InvitationStatus.ACCEPTED)
    return membership


@transaction.atomic
def invitation_decline(*, user, invitation_id: int) -> None:
    _respond(
        _pending_invitation_for_update(user=user, invitation_id=invitation_id), InvitationStatus.DECLINED
    )


def _pending_invitation_for_update(*, user, invitation_id: int) -> Invitation:
    # Someone else's invitation answers like a missing one: it is not theirs to see.
    invitation = (
        Invitation.objects.select_for_update()
        .filter(pk=invitation_id, invitee_id=user.pk, status=InvitationStatus.PENDING)
        .first()
    )
    if invitation is None:
        raise Http404("No such invitation.")
    return invitation


def _respond(invitation: Invitation, status: str) -> None:
    invitation.status = status
    invitation.responded_at = timezone.now()
    invitation.save(update_fields=["status", "responded_at"])


@transaction.atomic
def current_team_choose(*, user, team: Team) -> None:
    """Make team the user's current team (their own choice, kept across logins); they must be a member."""
    memberships = Membership.objects.select_for_update().filter(user_id=user.pk)
    chosen = memberships.filter(team=team)
    if not chosen.exists():
        raise PermissionDenied(f"You are not in {team}.")
    memberships.filter(is_current=True).exclude(team=team).update(is_current=False)
    chosen.update(is_current=True)


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
