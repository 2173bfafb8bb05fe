"""Chart series for a visible step range, downsampled in SQL to min, max and last per bucket.

The source is the finest pyramid level whose buckets are no wider than an output bucket (raw points
when zoomed in), so a request reads at most ~4 rows per output bucket and series whatever the run
length. The final grouping picks each bucket's extremes and last value: on PostgreSQL with one hash
aggregate over arrays (min of [value, step] is the minimum with its step), elsewhere (SQLite) with
window functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db import connection
from django.db.models import Max

from ..models import MetricPoint, MetricRollup, Run
from .rollups import FACTOR, TOP_LEVEL, level_width

_RAW = """
    SELECT key, step AS first_step, value AS min_value, step AS min_step, value AS max_value,
           step AS max_step, value AS last_value, step AS last_step
    FROM {table} WHERE run_id = %s AND key IN ({keys}) AND step BETWEEN %s AND %s
"""
_ROLLUP = """
    SELECT key, bucket * %s AS first_step, min_value, min_step, max_value, max_step, last_value, last_step
    FROM {table} WHERE run_id = %s AND level = %s AND key IN ({keys}) AND bucket BETWEEN %s AND %s
"""
_DOWNSAMPLE_POSTGRES = """
    SELECT key, step::bigint, value FROM (
        SELECT key, unnest(ARRAY[lo[2], -hi[2], last[1]]) AS step,
            unnest(ARRAY[lo[1], hi[1], last[2]]) AS value
        FROM (
            SELECT key, MIN(ARRAY[min_value, min_step]) AS lo, MAX(ARRAY[max_value, -max_step]) AS hi,
                MAX(ARRAY[last_step, last_value]) AS last
            FROM ({source}) s GROUP BY key, (first_step - %s) / %s
        ) buckets
    ) points ORDER BY step
"""
_DOWNSAMPLE_PORTABLE = """
    WITH src AS (SELECT s.*, (s.first_step - %s) / %s AS b FROM ({source}) s),
    ranked AS (
        SELECT src.*,
            ROW_NUMBER() OVER (PARTITION BY key, b ORDER BY min_value, min_step) AS rn_min,
            ROW_NUMBER() OVER (PARTITION BY key, b ORDER BY max_value DESC, max_step) AS rn_max,
            ROW_NUMBER() OVER (PARTITION BY key, b ORDER BY last_step DESC) AS rn_last
        FROM src
    ),
    agg AS (
        SELECT key,
            MAX(CASE WHEN rn_min = 1 THEN min_step END) AS lo_step, MIN(min_value) AS lo,
            MAX(CASE WHEN rn_max = 1 THEN max_step END) AS hi_step, MAX(max_value) AS hi,
            MAX(last_step) AS last_step, MAX(CASE WHEN rn_last = 1 THEN last_value END) AS last
        FROM ranked GROUP BY key, b
    )
    SELECT key, lo_step, lo FROM agg UNION SELECT key, hi_step, hi FROM agg
    UNION SELECT key, last_step, last FROM agg ORDER BY 1, 2
"""


@dataclass(frozen=True)
class Window:
    """The visible step range and how it is bucketed."""

    lo: int
    hi: int
    buckets: int

    @property
    def bucket_width(self) -> int:
        return max(1, math.ceil((self.hi - self.lo + 1) / self.buckets))

    @property
    def level(self) -> int:
        """The coarsest pyramid level whose bucket fits inside one output bucket (0 = raw points)."""
        return min(TOP_LEVEL, int(math.log(self.bucket_width, FACTOR) + 1e-9))


def _source_sql(window: Window, run_id: int, keys: list[str]) -> tuple[str, list]:
    placeholders = ", ".join(["%s"] * len(keys))
    if window.level == 0:
        sql = _RAW.format(table=MetricPoint._meta.db_table, keys=placeholders)
        return sql, [run_id, *keys, window.lo, window.hi]
    width = level_width(window.level)
    sql = _ROLLUP.format(table=MetricRollup._meta.db_table, keys=placeholders)
    return sql, [width, run_id, window.level, *keys, window.lo // width, window.hi // width]


def series_downsample(
    *, run: Run, keys: list[str], step_min: int | None = None, step_max: int | None = None, buckets: int = 200
) -> dict[str, list[tuple[int, float]]]:
    """Per key, (step, value) points: each bucket's min, max and last, in step order. Without `step_max`
    the window ends at the last step these keys logged (SFT steps are counted apart from RL steps)."""
    hi = step_max if step_max is not None else _last_logged_step(run, keys)
    window = Window(lo=max(0, step_min or 0), hi=hi, buckets=max(1, buckets))
    out: dict[str, list[tuple[int, float]]] = {key: [] for key in keys}
    if not keys or window.hi < window.lo:
        return out
    source, params = _source_sql(window, run.pk, keys)
    for key, step, value in _points(source, params, window, postgres=connection.vendor == "postgresql"):
        points = out[key]
        if not points or points[-1][0] != step:  # a bucket's min, max and last may be one point
            points.append((int(step), value))
    return out


def _last_logged_step(run: Run, keys: list[str]) -> int:
    """The last step any of `keys` logged, read from the top of the pyramid (one row per key)."""
    rows = MetricRollup.objects.filter(run=run, level=TOP_LEVEL, key__in=keys)
    return rows.aggregate(last=Max("last_step"))["last"] or 0


def _points(source: str, params: list, window: Window, *, postgres: bool) -> list[tuple[str, int, float]]:
    """(key, step, value) of each bucket's min, max and last point, in step order (sorting integers
    only: a sort on the text key under the database collation cost more than the rest of the query)."""
    sql, args = (
        (_DOWNSAMPLE_POSTGRES.format(source=source), [*params, window.lo, window.bucket_width])
        if postgres
        else (_DOWNSAMPLE_PORTABLE.format(source=source), [window.lo, window.bucket_width, *params])
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


@dataclass(frozen=True)
class SFTProgress:
    step: int
    fraction: float  # SFT steps done / planned

    @property
    def percent(self) -> int:
        return int(self.fraction * 100)

    @property
    def total(self) -> int:
        """The SFT steps planned (`step` of them done)."""
        return round(self.step / self.fraction) if self.fraction > 0 else self.step

    def __str__(self) -> str:
        return f"SFT {self.step}/{self.total}"


SFT_PROGRESS_KEY = "sft/progress"  # trainers.metrics.keys.SFT_PROGRESS, logged at every SFT step


def sft_progress(*, run: Run) -> SFTProgress | None:
    """The SFT warm start's last stored step and how far it got; None for a run without one (yet)."""
    point = MetricPoint.objects.filter(run=run, key=SFT_PROGRESS_KEY).order_by("-step").first()
    return SFTProgress(point.step, point.value) if point is not None else None


def sft_progress_by_run(*, run_ids: list[int]) -> dict[int, SFTProgress]:
    """Run id -> its SFT progress, for those of the runs that logged one: one query for any number."""
    if not run_ids:
        return {}
    points = (
        MetricPoint.objects.filter(run_id__in=run_ids, key=SFT_PROGRESS_KEY)
        .order_by("run_id", "-step")
        .distinct("run_id")
        .values_list("run_id", "step", "value")
    )
    return {run_id: SFTProgress(step, value) for run_id, step, value in points}


def series_keys(*, run: Run) -> list[str]:
    """Every series a run has logged, read from the small top level of the pyramid."""
    keys = MetricRollup.objects.filter(run=run, level=TOP_LEVEL).values_list("key", flat=True)
    return sorted(set(keys))


def series_keys_union(*, runs: list[Run]) -> list[str]:
    """Every series any of the runs has logged, in one query whatever the number of runs."""
    keys = MetricRollup.objects.filter(run__in=runs, level=TOP_LEVEL).values_list("key", flat=True).distinct()
    return sorted(keys)
