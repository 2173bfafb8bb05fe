"""Comparing runs: the config keys that differ and a summary row per run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, OuterRef, Q, Subquery, Sum, Window
from django.db.models.functions import RowNumber

from ..models import EVAL_ACCURACY_KEYS, Alert, MetricPoint, Run, TrajectoryRecord
from ..telemetry.rollups import series_maxima

SUMMARY_KEYS = ("reward/mean", *EVAL_ACCURACY_KEYS)
_MAX_ID_DIGITS = 18  # below 2**63: a longer number is no run id and must not reach the database


def run_ids_param(values: list[str]) -> list[int]:
    """Run ids from the `runs` query values: `?runs=3,5` (the shareable address) and `?runs=3&runs=5`
    (what a form with one box per run submits) alike, mixed too; in first-mention order, once each."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if part.isascii() and part.isdigit() and len(part) <= _MAX_ID_DIGITS and int(part) not in ids:
                ids.append(int(part))
    return ids


def _leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(config, dict) and config:
        out: dict[str, Any] = {}
        for key, value in config.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: config}


def config_diff(configs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(dotted key, value per run as JSON) for the keys whose values are not all equal."""
    flat = [_leaves(config) for config in configs]
    keys = sorted(set().union(*flat)) if flat else []
    rows = []
    for key in keys:
        values = [json.dumps(f.get(key), sort_keys=True) if key in f else "—" for f in flat]
        if len(set(values)) > 1:
            rows.append((key, values))
    return rows


@dataclass
class Summary:
    run: Run
    final: dict[str, float | None]
    best: dict[str, float | None]
    tool_calls_per_solved: float | None
    alert: Alert | None  # the latest one
    alert_count: int

    @property
    def eval_accuracy(self) -> tuple[str, float] | None:
        """(key, final value) of the first evaluation accuracy the run logged, greedy first."""
        return next(((key, self.final[key]) for key in EVAL_ACCURACY_KEYS if self.final.get(key) is not None),
                    None)  # fmt: skip


def _finals(run_ids: list[int]) -> dict[tuple[int, str], float]:
    """(run id, key) -> the value at the series' last step, for every run in one query (the unique
    (run, key, step) index answers the correlated max-step lookup)."""
    last_step = (
        MetricPoint.objects.filter(run_id=OuterRef("run_id"), key=OuterRef("key"))
        .order_by("-step")
        .values("step")[:1]
    )
    rows = MetricPoint.objects.filter(run_id__in=run_ids, key__in=SUMMARY_KEYS, step=Subquery(last_step))
    return {(run_id, key): value for run_id, key, value in rows.values_list("run_id", "key", "value")}


def _bests(run_ids: list[int]) -> dict[tuple[int, str], float]:
    """(run id, key) -> the maximum over the whole run, for every run in one query."""
    return {ident: value for ident, (value, _) in series_maxima(run_ids=run_ids, keys=SUMMARY_KEYS).items()}


def _tool_calls_per_solved(run_ids: list[int]) -> dict[int, float]:
    """OTC's tool productivity, inverted: tool calls spent per correctly solved stored trajectory, per
    run, in one query; runs with nothing solved are absent."""
    rows = (
        TrajectoryRecord.objects.filter(run_id__in=run_ids)
        .values("run_id")
        .annotate(calls=Sum("num_tool_calls"), solved=Count("id", filter=Q(correct=True)))
        .order_by()
    )
    return {row["run_id"]: row["calls"] / row["solved"] for row in rows if row["solved"]}


def _latest_alerts(run_ids: list[int]) -> dict[int, Alert]:
    """run id -> its latest alert, annotated with `total` (how many the run raised), in one query."""
    latest_first = [F("step").desc(), F("id").desc()]
    rows = (
        Alert.objects.filter(run_id__in=run_ids)
        .annotate(
            total=Window(Count("id"), partition_by=[F("run_id")]),
            rank=Window(RowNumber(), partition_by=[F("run_id")], order_by=latest_first),
        )
        .filter(rank=1)
    )
    return {alert.run_id: alert for alert in rows}


def compare_summary(runs: list[Run]) -> list[Summary]:
    """One summary row per run, from four queries whatever the number of runs."""
    ids = [run.pk for run in runs]
    if not ids:
        return []
    finals, bests, productivity = _finals(ids), _bests(ids), _tool_calls_per_solved(ids)
    alerts = _latest_alerts(ids)
    return [
        Summary(
            run=run,
            final={key: finals.get((run.pk, key)) for key in SUMMARY_KEYS},
            best={key: bests.get((run.pk, key)) for key in SUMMARY_KEYS},
            tool_calls_per_solved=productivity.get(run.pk),
            alert=alerts.get(run.pk),
            alert_count=alerts[run.pk].total if run.pk in alerts else 0,
        )
        for run in runs
    ]
