"""Puts the user's current team and role on every request (request.team, request.team_role)."""

from workbench.accounts.selectors import current_membership


class CurrentTeamMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.team, request.team_role = None, None
        if request.user.is_authenticated:
            membership = current_membership(user=request.user)
            if membership is not None:
                request.team, request.team_role = membership.team, membership.role
        return self.get_response(request)
