"""Reads: evaluations scoped to the user's teams, their trajectories, and a dataset version's leaderboard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404, team_queryset
from workbench.accounts.models import Role
from workbench.datasets.models import DatasetVersion
from workbench.runs.trajectories.filters import SORTS, TrajectoryFilters

from .models import Evaluation, EvaluationStatus, EvaluationTrajectory


def evaluation_list(*, user, team=None) -> QuerySet[Evaluation]:
    """The evaluations the user may see (one team's when given), newest first."""
    qs = team_queryset(Evaluation, user).select_related("dataset_version__item", "created_by", "run")
    return qs.filter(team=team) if team is not None else qs


def evaluation_get(*, user, pk: Any, min_role: str = Role.VIEWER) -> Evaluation:
    """The evaluation if one of the user's teams owns it; 404 otherwise (403 when the role is too low)."""
    return get_scoped_or_404(Evaluation, user, pk, min_role=min_role)


def leaderboard_versions(*, user, team=None) -> QuerySet[DatasetVersion]:
    """Dataset versions with at least one finished evaluation the user may see, with how many."""
    evaluations = evaluation_list(user=user, team=team).filter(status=EvaluationStatus.SUCCEEDED)
    qs = team_queryset(DatasetVersion, user).filter(evaluations__in=evaluations).select_related("item")
    return qs.annotate(evaluated=Count("evaluations", distinct=True)).order_by("item__name", "-number")


def trajectory_list(
    *, evaluation: Evaluation, filters: TrajectoryFilters, sort: str = ""
) -> QuerySet[EvaluationTrajectory]:
    """The evaluation's trajectories matching the inspector's filters (its step filter does not apply)."""
    qs = evaluation.trajectories.filter(filters.as_q())
    column = SORTS.get(sort.lstrip("-"))
    if column is None or column == "step":
        return qs.order_by("group_id", "sample_index")
    return qs.order_by(f"{'-' if sort.startswith('-') else ''}{column}", "id")


def trajectory_get(*, evaluation: Evaluation, pk: Any) -> EvaluationTrajectory:
    """One trajectory of the evaluation (already scoped to the user); 404 for any other id."""
    try:
        return evaluation.trajectories.get(pk=pk)
    except (EvaluationTrajectory.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404 from exc


@dataclass(frozen=True)
class Column:
    """A leaderboard column: its sort key, heading and how to read it from an evaluation."""

    key: str
    label: str
    value: Callable[[Evaluation], Any]
    number: bool = True


def _metric(name: str) -> Callable[[Evaluation], Any]:
    return lambda evaluation: evaluation.metrics.get(name)


LEADERBOARD_COLUMNS = [
    Column("model", "Model", lambda e: e.model_label, number=False),
    Column("name", "Evaluation", lambda e: e.name, number=False),
    Column("split", "Split", lambda e: e.split, number=False),
    Column("k", "k", lambda e: e.samples),
    Column("accuracy", "Accuracy", _metric("accuracy")),
    Column("pass_at_k", "pass@k", lambda e: e.pass_at_k),
    Column("pass_at_1", "pass@1", _metric("pass@1")),
    Column("tool_call_rate", "Tool-call rate", _metric("tool_call_rate")),
    Column("calls_per_solved", "Calls per solved", _metric("tool_calls_per_solved")),
    Column("failed_calls", "Failed calls / traj.", _metric("failed_calls_per_traj")),
    Column("failed_call_rate", "Failed call rate", _metric("failed_call_rate")),
    Column("length", "Response length", _metric("response_length")),
    Column("reward", "Mean reward", _metric("reward_mean")),
    Column("problems", "Problems", _metric("problems")),
    Column("created", "Evaluated", lambda e: e.finished_at, number=False),
]
COLUMNS_BY_KEY = {column.key: column for column in LEADERBOARD_COLUMNS}
DEFAULT_SORT = "-accuracy"


def leaderboard(*, user, version: DatasetVersion, sort: str = DEFAULT_SORT) -> tuple[list[Evaluation], str]:
    """The finished evaluations on this dataset version the user may see, sorted by a column (`-` first:
    descending; an unknown column sorts by accuracy); an evaluation without the value comes last.
    Returns (evaluations, the sort applied)."""
    column = COLUMNS_BY_KEY.get(sort.lstrip("-"))
    if column is None:
        sort, column = DEFAULT_SORT, COLUMNS_BY_KEY[DEFAULT_SORT.lstrip("-")]
    descending = sort.startswith("-")
    rows = list(
        evaluation_list(user=user)
        .filter(dataset_version=version, status=EvaluationStatus.SUCCEEDED)
        .order_by("-finished_at", "-id")
    )
    present = [row for row in rows if column.value(row) is not None]
    missing = [row for row in rows if column.value(row) is None]
    present.sort(key=column.value, reverse=descending)
    return present + missing, sort
