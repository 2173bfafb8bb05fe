"""Comparing runs: the config keys that differ and a summary row per run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max, Q, Sum

from .models import MetricPoint, MetricRollup, Run
from .rollups import TOP_LEVEL

SUMMARY_KEYS = ("reward/mean", "eval/accuracy")


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


def _final(run: Run, key: str) -> float | None:
    point = MetricPoint.objects.filter(run=run, key=key).order_by("-step").values_list("value", flat=True)
    return point.first()


def _best(run: Run, key: str) -> float | None:
    """The maximum over the whole run, read from the top of the rollup pyramid (a few rows)."""
    return MetricRollup.objects.filter(run=run, key=key, level=TOP_LEVEL).aggregate(v=Max("max_value"))["v"]


def _tool_calls_per_solved(run: Run) -> float | None:
    """OTC's tool productivity, inverted: tool calls spent per correctly solved stored trajectory."""
    totals = run.trajectories.aggregate(
        calls=Sum("num_tool_calls"), solved=Count("id", filter=Q(correct=True))
    )
    return totals["calls"] / totals["solved"] if totals["solved"] else None


def compare_summary(runs: list[Run]) -> list[Summary]:
    return [
        Summary(
            run=run,
            final={key: _final(run, key) for key in SUMMARY_KEYS},
            best={key: _best(run, key) for key in SUMMARY_KEYS},
            tool_calls_per_solved=_tool_calls_per_solved(run),
        )
        for run in runs
    ]
