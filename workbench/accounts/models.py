"""A team owns every catalog object and run; a membership gives a user one role in one team.

Nobody is put in a team by someone else: a team admin invites, and only the invitee's acceptance
creates the membership. The current team is the user's own choice (Membership.is_current).
"""

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"  # read
    MEMBER = "member", "Member"  # create, edit, launch
    ADMIN = "admin", "Admin"  # manage members


# Roles are ordered: a check for "member" passes for admins too.
ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # The team the user last chose to work in; at most one per user, kept across sessions.
    is_current = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="accounts_membership_unique"),
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(is_current=True), name="accounts_membership_one_current"
            ),
        ]
        ordering = ["team__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    DECLINED = "declined", "Declined"


class Invitation(models.Model):
    """A team admin's offer of a role in the team; the invitee accepts (becoming a member) or declines."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    invitee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_invitations"
    )
    inviter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    status = models.CharField(
        max_length=10, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    responded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "invitee"],
                condition=models.Q(status="pending"),
                name="accounts_invitation_one_pending",
            )
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.invitee} to {self.team} as {self.role} ({self.status})"
