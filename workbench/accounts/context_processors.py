"""Template context for the team switcher and the pending invitations count in the navigation bar."""

from workbench.accounts.selectors import pending_invitations_for, teams_for_user


def teams(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "current_team": getattr(request, "team", None),
        "current_role": getattr(request, "team_role", None),
        "user_teams": teams_for_user(user=user),
        "pending_invitations": pending_invitations_for(user=user).count(),
    }
