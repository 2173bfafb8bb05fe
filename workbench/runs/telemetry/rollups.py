"""The min/max/last pyramid behind fast charts: level L buckets 4**L steps.

Each level is recomputed from the level below for the buckets a write touched, so it is exact
(overwritten points do not leave stale extremes behind) and a flush costs O(levels) small queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import F

from ..models import MetricPoint, MetricRollup, Run

FACTOR = 4
TOP_LEVEL = 8  # 4**8 = 65,536 steps per bucket: enough for runs of millions of steps


def level_width(level: int) -> int:
    return FACTOR**level


@dataclass(frozen=True)
class Agg:
    """Extremes and last value of a span of one series, with the steps where they occurred."""

    min_value: float
    min_step: int
    max_value: float
    max_step: int
    last_value: float
    last_step: int

    @classmethod
    def point(cls, step: int, value: float) -> Agg:
        return cls(value, step, value, step, value, step)

    def merge(self, other: Agg) -> Agg:
        """Ties keep the earlier step, so the result does not depend on merge order."""
        lo = min((self.min_value, self.min_step), (other.min_value, other.min_step))
        hi = max((self.max_value, -self.max_step), (other.max_value, -other.max_step))
        last = max((self.last_step, self.last_value), (other.last_step, other.last_value))
        return Agg(lo[0], lo[1], hi[0], -hi[1], last[1], last[0])


def combine(rows: Iterable[tuple[str, int, Agg]], width: int) -> dict[tuple[str, int], Agg]:
    """Group (key, step, agg) rows into buckets of `width` steps by the row's first step."""
    out: dict[tuple[str, int], Agg] = {}
    for key, first_step, agg in rows:
        ident = (key, first_step // width)
        out[ident] = out[ident].merge(agg) if ident in out else agg
    return out


def _source_rows(run_id: int, keys: list[str], level: int, b_lo: int, b_hi: int):
    """Rows of level-1 (raw points for level 1) inside buckets b_lo..b_hi of `level`, as (key, step, Agg)."""
    width = level_width(level)
    if level == 1:
        points = MetricPoint.objects.filter(
            run_id=run_id, key__in=keys, step__gte=b_lo * width, step__lt=(b_hi + 1) * width
        ).values_list("key", "step", "value")
        return [(key, step, Agg.point(step, value)) for key, step, value in points]
    below = level_width(level - 1)
    rows = MetricRollup.objects.filter(
        run_id=run_id,
        key__in=keys,
        level=level - 1,
        bucket__gte=b_lo * FACTOR,
        bucket__lt=(b_hi + 1) * FACTOR,
    ).values_list(
        "key", "bucket", "min_value", "min_step", "max_value", "max_step", "last_value", "last_step"
    )
    return [(r[0], r[1] * below, Agg(*r[2:])) for r in rows]


def rollups_refresh(*, run_id: int, keys: list[str], step_lo: int, step_hi: int) -> None:
    """Recompute every level's buckets that overlap [step_lo, step_hi] for `keys` (call inside the write)."""
    for level in range(1, TOP_LEVEL + 1):
        width = level_width(level)
        b_lo, b_hi = step_lo // width, step_hi // width
        buckets = combine(_source_rows(run_id, keys, level, b_lo, b_hi), width)
        MetricRollup.objects.bulk_create(
            [
                MetricRollup(run_id=run_id, key=key, level=level, bucket=bucket, **agg.__dict__)
                for (key, bucket), agg in buckets.items()
            ],
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["run", "key", "level", "bucket"],
            update_fields=["min_value", "min_step", "max_value", "max_step", "last_value", "last_step"],
        )


def rollups_rebuild(*, run_id: int, chunk_steps: int = FACTOR**7) -> None:
    """Rebuild the whole pyramid of a run chunk by chunk (after a bulk import such as a benchmark seed)."""
    bounds = MetricPoint.objects.filter(run_id=run_id).values_list("step", flat=True)
    first, last = bounds.order_by("step").first(), bounds.order_by("-step").first()
    if first is None:
        return
    keys = list(MetricPoint.objects.filter(run_id=run_id).values_list("key", flat=True).distinct())
    for lo in range(first - first % chunk_steps, last + 1, chunk_steps):
        rollups_refresh(run_id=run_id, keys=keys, step_lo=lo, step_hi=min(lo + chunk_steps - 1, last))
    Run.objects.filter(pk=run_id).update(data_version=F("data_version") + 1)  # cached charts are stale


def series_maxima(*, run_ids: list[int], keys: Iterable[str]) -> dict[tuple[int, str], tuple[float, int]]:
    """(run id, key) -> (maximum over the whole run, the first step where it occurred), read from the top
    of the pyramid (a few rows per run and key) for every run in one query; series never logged are absent."""
    rows = MetricRollup.objects.filter(run_id__in=run_ids, key__in=list(keys), level=TOP_LEVEL).values_list(
        "run_id", "key", "max_value", "max_step"
    )
    best: dict[tuple[int, str], tuple[float, int]] = {}
    for run_id, key, value, step in rows:
        current = best.get((run_id, key))
        if current is None or (value, -step) > (current[0], -current[1]):
            best[(run_id, key)] = (value, step)
    return best
