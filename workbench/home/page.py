"""What a team's home page shows: runs in flight, recently finished runs, catalog changes, workers
online with what they hold, and the recipes to start a run from; every read scoped to the team."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.accounts.access import role_at_least
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import recent_changes
from workbench.jobs.models import WorkerHeartbeat
from workbench.jobs.selectors import workers_online
from workbench.runs.models import Run
from workbench.runs.web.overview import (
    SPARKLINE_KEY,
    RunInFlight,
    runs_held,
    runs_in_flight,
    runs_recently_finished,
)
from workbench.runs.web.recipes import recipe_choices

from .sparkline import Sparkline, sparkline


@dataclass(frozen=True)
class InFlightRow:
    entry: RunInFlight
    sparkline: Sparkline | None


@dataclass(frozen=True)
class WorkerRow:
    worker: WorkerHeartbeat
    runs: list[Run]  # the team's runs it is running


def live_context(*, user, team: Team) -> dict:
    """The parts that change while runs train: runs in flight, the workers that hold them, and the runs
    that finished (a run in flight moves there)."""
    workers = list(workers_online())
    held = runs_held(user=user, team=team, workers=[worker.hostname for worker in workers])
    return {
        "in_flight": [
            InFlightRow(entry, sparkline(entry.reward)) for entry in runs_in_flight(user=user, team=team)
        ],
        "sparkline_key": SPARKLINE_KEY,
        "workers": [WorkerRow(worker, held.get(worker.hostname, [])) for worker in workers],
        "finished": runs_recently_finished(user=user, team=team),
    }


def home_context(*, user, team: Team, role: str | None) -> dict:
    """Everything on the page; recipes only for those who may launch a run."""
    return {
        **live_context(user=user, team=team),
        "catalog_changes": recent_changes(user=user, team=team),
        "recipes": recipe_choices() if role_at_least(role, Role.MEMBER) else [],
    }
