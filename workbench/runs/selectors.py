"""Reads: runs scoped to the user's teams, and the trajectory inspector's filtered, paginated lists."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from workbench.accounts.access import get_scoped_or_404, team_queryset
from workbench.accounts.models import Role

from .models import Run, TrajectoryRecord
from .trajectories.filters import SORTS, TrajectoryFilters


def run_list(*, user, team=None, status: str = "", tag: str = "", search: str = "") -> QuerySet[Run]:
    """The runs the user may see (one team's when given), newest first."""
    qs = team_queryset(Run, user).select_related("created_by", "team").prefetch_related("tags")
    if team is not None:
        qs = qs.filter(team=team)
    if status:
        qs = qs.filter(status=status)
    if tag:
        qs = qs.filter(tags__name=tag)
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(notes__icontains=search))
    return qs.distinct()


def run_get(*, user, pk: Any, min_role: str = Role.VIEWER) -> Run:
    """The run if one of the user's teams owns it; 404 otherwise (403 when the role is too low)."""
    return get_scoped_or_404(Run, user, pk, min_role=min_role)


LIST_COLUMNS = [
    "id", "step", "key", "group_id", "sample_index", "reward", "advantage", "correct", "num_turns",
    "num_tool_calls", "num_failed_calls", "length", "tool_counts", "final_answer",
]  # fmt: skip


@dataclass(frozen=True)
class Page:
    items: list[TrajectoryRecord]
    next_cursor: str | None


def _encode_cursor(value: Any, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[Any, int] | None:
    """A tampered or stale cursor restarts from the first page instead of failing."""
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return (value, int(pk)) if isinstance(value, int | float) else None
    except (ValueError, TypeError):
        return None


def _after(column: str, descending: bool, value: Any, pk: int) -> Q:
    """Keyset condition for rows after (value, pk); the redundant bound lets the index start there."""
    if descending:
        return Q(**{f"{column}__lte": value}) & (Q(**{f"{column}__lt": value}) | Q(pk__lt=pk))
    return Q(**{f"{column}__gte": value}) & (Q(**{f"{column}__gt": value}) | Q(pk__gt=pk))


def trajectory_list(
    *, run: Run, filters: TrajectoryFilters, sort: str = "-reward", cursor: str = "", limit: int = 50
) -> Page:
    """One page of a run's trajectories matching `filters`, ordered by `sort` then id (keyset paginated)."""
    descending = sort.startswith("-")
    column = SORTS.get(sort.lstrip("-"), "reward")
    qs = TrajectoryRecord.objects.filter(run=run).filter(filters.as_q()).only(*LIST_COLUMNS)
    position = _decode_cursor(cursor) if cursor else None
    if position is not None:
        qs = qs.filter(_after(column, descending, *position))
    prefix = "-" if descending else ""
    rows = list(qs.order_by(f"{prefix}{column}", f"{prefix}id")[: limit + 1])
    items, more = rows[:limit], len(rows) > limit
    next_cursor = _encode_cursor(getattr(items[-1], column), items[-1].pk) if more else None
    return Page(items=items, next_cursor=next_cursor)


def trajectory_get(*, run: Run, pk: Any) -> TrajectoryRecord:
    """One trajectory of this run (the run is already team-checked); 404 for another run's or a bad id."""
    try:
        return TrajectoryRecord.objects.get(run=run, pk=int(pk))
    except (TrajectoryRecord.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404 from exc


def trajectory_group(*, run: Run, step: int, group_id: str) -> list[TrajectoryRecord]:
    """All samples of one prompt at one step: what GRPO compared."""
    return list(
        TrajectoryRecord.objects.filter(run=run, step=step, group_id=group_id).order_by("sample_index")
    )


def runs_for_compare(*, user, ids: list[int] | None = None, tag: str = "", limit: int = 12) -> list[Run]:
    """Runs named in `ids` and/or carrying `tag`, among those the user may see."""
    wanted = ids or []
    qs = team_queryset(Run, user).select_related("created_by")
    if not wanted and not tag:
        return []
    q = Q(pk__in=wanted) if wanted else Q()
    if tag:
        q = (q | Q(tags__name=tag)) if wanted else Q(tags__name=tag)
    return list(qs.filter(q).distinct().order_by("created_at")[:limit])


# The RL loop names a group "<step>.<round>.<index>:<row id>" (trainers/training/loop.py, `rollout`);
# a dataset row's id is "row<n>" unless the row brings its own (trainers/training/data.py).
GROUP_PREFIX = re.compile(r"^\d+\.\d+\.\d+:")


def dataset_row_ids(entry: str) -> list[str]:
    """The row ids a reader may mean: `row102`, `102` (the row numbered 102), or a whole group id."""
    row = GROUP_PREFIX.sub("", entry.strip())
    return [row, f"row{row}"] if row.isdigit() else [row]


def _of_rows(row_ids: list[str]) -> Q:
    """Groups of any of these rows, drawn at any step (or named by the bare row id)."""
    q = Q()
    for row in row_ids:
        q |= Q(group_id=row) | Q(group_id__endswith=f":{row}")
    return q


class SamePrompt(NamedTuple):
    """One run's samples of a dataset row, from the latest group it drew the row in (none: never drawn)."""

    run: Run
    records: list[TrajectoryRecord]

    @property
    def prompt(self) -> str:
        """The row's prompt as the run rendered it (its template, system prompt and tool specs)."""
        turns = self.records[0].data.get("turns", []) if self.records else []
        return next((turn.get("text", "") for turn in turns if turn.get("role") == "prompt"), "")


def trajectories_same_prompt(*, runs: list[Run], row: str) -> list[SamePrompt]:
    """Per run, the samples of one dataset row (`row102`, `102` or a group id naming it) in the latest
    group that drew it, read in one query whatever the number of runs."""
    if not runs or not row.strip():
        return []
    matching = TrajectoryRecord.objects.filter(_of_rows(dataset_row_ids(row)), run_id=OuterRef("run_id"))
    latest = matching.order_by("-step", "-group_id")
    records = TrajectoryRecord.objects.filter(
        run__in=runs,
        step=Subquery(latest.values("step")[:1]),
        group_id=Subquery(latest.values("group_id")[:1]),
    ).order_by("run_id", "sample_index")
    by_run: dict[int, list[TrajectoryRecord]] = {run.pk: [] for run in runs}
    for record in records:
        by_run[record.run_id].append(record)
    return [SamePrompt(run, by_run[run.pk]) for run in runs]


@dataclass(frozen=True)
class AnchorStep:
    sample_index: int
    turn: int
    advantage: float | None
    env_reward: float | None
    action: str


def anchor_state_groups(records: list[TrajectoryRecord]) -> list[tuple[str, list[AnchorStep]]]:
    """GiGPO's step groups (arXiv 2505.10978): the group's assistant turns that acted from the same
    environment state, largest groups first; empty for runs without environment states."""
    groups: dict[str, list[AnchorStep]] = {}
    for record in records:
        turns = [t for t in record.data.get("turns", []) if t.get("role") == "assistant"]
        for number, turn in enumerate(turns, start=1):
            if turn.get("state_hash"):
                step = AnchorStep(
                    record.sample_index, number, turn.get("advantage"), turn.get("env_reward"), turn["text"]
                )
                groups.setdefault(turn["state_hash"], []).append(step)
    return sorted(groups.items(), key=lambda item: -len(item[1]))
