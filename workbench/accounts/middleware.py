"""Puts the user's current team and role on every request (request.team, request.team_role)."""

from workbench.accounts.models import Membership, Team

SESSION_KEY = "current_team_id"


def current_team_set(request, team: Team) -> None:
    """Remember team as the current one; the caller has checked membership."""
    request.session[SESSION_KEY] = team.pk
    request.team = team


class CurrentTeamMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.team, request.team_role = None, None
        if request.user.is_authenticated:
            request.team, request.team_role = self._resolve(request)
        return self.get_response(request)

    @staticmethod
    def _resolve(request) -> tuple[Team | None, str | None]:
        # The session's team if the user is still a member, else their first team.
        memberships = list(Membership.objects.filter(user_id=request.user.pk).select_related("team"))
        chosen = request.session.get(SESSION_KEY)
        for membership in memberships:
            if membership.team_id == chosen:
                return membership.team, membership.role
        if not memberships:
            return None, None
        first = min(memberships, key=lambda m: m.team.name)
        request.session[SESSION_KEY] = first.team_id
        return first.team, first.role
