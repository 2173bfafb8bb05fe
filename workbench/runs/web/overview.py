"""Reads for a team's home page: runs in flight with their step, a reward sparkline and their latest
alert; recently finished runs with their best metric; the runs each online worker holds. Each reads a
fixed number of queries whatever the number of runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, Subquery, Value, When

from workbench.accounts.access import team_queryset
from workbench.accounts.models import Team

from ..models import EVAL_ACCURACY_KEYS, FINISHED_STATUSES, Alert, MetricPoint, MetricRollup, Run, RunStatus
from ..telemetry.rollups import TOP_LEVEL, level_width, series_maxima
from ..telemetry.series import SFTProgress, sft_progress_by_run

SPARKLINE_KEY = "reward/mean"
SPARKLINE_POINTS = 48  # at most this many points per sparkline
BEST_KEYS = (*EVAL_ACCURACY_KEYS, "reward/mean")  # a run's headline metric: the first of these it logged
IN_FLIGHT = (RunStatus.RUNNING, RunStatus.QUEUED)


@dataclass(frozen=True)
class RunInFlight:
    run: Run
    reward: list[tuple[int, float]]  # (step, reward/mean): each sparkline bucket's last point
    alert: Alert | None  # the latest one
    alert_count: int
    sft: SFTProgress | None = None  # the SFT warm start's progress, while no RL step is stored

    @property
    def total_steps(self) -> int:
        return self.run.typed_config.training.steps


@dataclass(frozen=True)
class BestMetric:
    key: str
    value: float
    step: int


@dataclass(frozen=True)
class FinishedRun:
    run: Run
    best: BestMetric | None


def runs_in_flight(*, user, team: Team, limit: int = 10) -> list[RunInFlight]:
    """The team's running runs, then its queued ones, newest first, in at most five queries."""
    latest_alert = Alert.objects.filter(run=OuterRef("pk")).order_by("-step", "-id").values("id")[:1]
    running_first = Case(
        When(status=RunStatus.RUNNING, then=Value(0)), default=Value(1), output_field=IntegerField()
    )
    runs = list(
        team_queryset(Run, user)
        .filter(team=team, status__in=IN_FLIGHT)
        .defer("notes", "error", "log_tail")
        .annotate(alert_count=Count("alerts"), latest_alert_id=Subquery(latest_alert))
        .order_by(running_first, "-created_at", "-id")[:limit]
    )
    alerts = Alert.objects.in_bulk([run.latest_alert_id for run in runs if run.latest_alert_id])
    sparklines = series_sparklines(runs=runs, key=SPARKLINE_KEY)
    sft = sft_progress_by_run(run_ids=[run.pk for run in runs if run.last_step is None])
    return [
        RunInFlight(
            run, sparklines[run.pk], alerts.get(run.latest_alert_id), run.alert_count, sft=sft.get(run.pk)
        )
        for run in runs
    ]


def runs_recently_finished(*, user, team: Team, limit: int = 5) -> list[FinishedRun]:
    """The team's last finished runs (succeeded, failed or cancelled) with their best metric: two queries."""
    runs = list(
        team_queryset(Run, user)
        .filter(team=team, status__in=FINISHED_STATUSES)
        .defer("config", "notes", "error", "log_tail")
        .order_by(F("finished_at").desc(nulls_last=True), "-id")[:limit]
    )
    best = best_metrics(run_ids=[run.pk for run in runs])
    return [FinishedRun(run, best.get(run.pk)) for run in runs]


def best_metrics(*, run_ids: list[int], keys: tuple[str, ...] = BEST_KEYS) -> dict[int, BestMetric]:
    """Run id -> the best (highest) value of the first of `keys` the run logged, with its step."""
    maxima = series_maxima(run_ids=run_ids, keys=keys)
    out: dict[int, BestMetric] = {}
    for run_id in run_ids:
        key = next((key for key in keys if (run_id, key) in maxima), None)
        if key is not None:
            value, step = maxima[(run_id, key)]
            out[run_id] = BestMetric(key, value, step)
    return out


def sparkline_level(last_step: int | None, points: int = SPARKLINE_POINTS) -> int:
    """The finest level of the chart pyramid (0: raw points) whose buckets over steps 0..last_step
    number at most `points`."""
    level = 0
    while level < TOP_LEVEL and (last_step or 0) // level_width(level) + 1 > points:
        level += 1
    return level


def series_sparklines(*, runs: Iterable[Run], key: str) -> dict[int, list[tuple[int, float]]]:
    """Run id -> (step, value) of `key`, the last point of each bucket of the run's sparkline level, in
    step order: raw points of short runs and pyramid rows of long ones, in at most two queries."""
    runs = list(runs)
    out: dict[int, list[tuple[int, float]]] = {run.pk: [] for run in runs}
    by_level: dict[int, list[int]] = {}
    for run in runs:
        by_level.setdefault(sparkline_level(run.last_step), []).append(run.pk)
    raw = by_level.pop(0, [])
    if raw:
        points = MetricPoint.objects.filter(run_id__in=raw, key=key).order_by("run_id", "step")
        for run_id, step, value in points.values_list("run_id", "step", "value"):
            out[run_id].append((step, value))
    if by_level:
        levels = reduce(or_, (Q(level=level, run_id__in=ids) for level, ids in by_level.items()))
        rollups = MetricRollup.objects.filter(levels, key=key).order_by("run_id", "bucket")
        for run_id, step, value in rollups.values_list("run_id", "last_step", "last_value"):
            out[run_id].append((step, value))
    return out


def runs_held(*, user, team: Team, workers: Iterable[str]) -> dict[str, list[Run]]:
    """Worker hostname -> the team's runs it is running now (other teams' runs are never read)."""
    held: dict[str, list[Run]] = {}
    runs = team_queryset(Run, user).filter(team=team, status=RunStatus.RUNNING, worker__in=list(workers))
    for run in runs.order_by("-started_at", "-id").only("id", "name", "worker", "last_step", "team_id"):
        held.setdefault(run.worker, []).append(run)
    return held
