"""Reads for the status page: the user's runs stranded right now and the newest hand-overs of their runs."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from workbench.accounts.access import team_queryset

from ..models import Run, RunRecovery
from .lease import lease_expired_q

RECOVERIES_SHOWN = 20


def runs_stranded(*, user) -> QuerySet[Run]:
    """Running runs of the user's teams whose lease expired: no sweep has handed them on yet (the next
    sweep of a live worker will; with no worker alive, they wait here)."""
    return team_queryset(Run, user).filter(lease_expired_q(timezone.now())).order_by("heartbeat_at", "pk")


def run_recoveries(*, user, limit: int = RECOVERIES_SHOWN) -> list[RunRecovery]:
    """The newest hand-overs of the user's runs: requeued, taken over by a delivery, or given up."""
    return list(team_queryset(RunRecovery, user).select_related("run")[:limit])
