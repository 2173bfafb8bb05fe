"""Template context for the team switcher in the navigation bar."""

from workbench.accounts.selectors import teams_for_user


def teams(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "current_team": getattr(request, "team", None),
        "current_role": getattr(request, "team_role", None),
        "user_teams": teams_for_user(user=user),
    }
