"""The home page, and its live part that the page polls."""

from django.shortcuts import render

from .page import home_context, live_context


def home(request):
    context = {}
    if request.team is not None:
        context = home_context(user=request.user, team=request.team, role=request.team_role)
    return render(request, "home/home.html", context)


def home_live(request):
    """Runs in flight and workers, re-rendered every few seconds by htmx (empty without a team), with the
    finished runs swapped in out of band."""
    context = (
        {} if request.team is None else live_context(user=request.user, team=request.team) | {"oob": True}
    )
    return render(request, "home/_live.html", context)
