"""Reads about teams, memberships and invitations."""

from django.db.models import QuerySet

from workbench.accounts.access import role_for_team_id, roles_at_least
from workbench.accounts.models import Invitation, InvitationStatus, Membership, Role, Team


def teams_for_user(*, user, min_role: str = Role.VIEWER) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(
        memberships__user_id=user.pk, memberships__role__in=roles_at_least(min_role)
    ).distinct()


def role_for(*, user, team: Team) -> str | None:
    """The user's role in team, or None when not a member."""
    return role_for_team_id(user, team.pk)


def memberships_for_user(*, user) -> QuerySet[Membership]:
    return Membership.objects.filter(user_id=user.pk).select_related("team").order_by("team__name")


def team_memberships(*, team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user").order_by("user__username")


def current_membership(*, user) -> Membership | None:
    """The membership of the team the user chose; before any choice, the one they joined first.

    Only the user's own choice changes it: joining another team (whatever its name) or logging in
    again never does.
    """
    return (
        Membership.objects.filter(user_id=user.pk)
        .select_related("team")
        .order_by("-is_current", "created_at", "pk")
        .first()
    )


def pending_invitations_for(*, user) -> QuerySet[Invitation]:
    return Invitation.objects.filter(invitee_id=user.pk, status=InvitationStatus.PENDING).select_related(
        "team", "inviter"
    )
