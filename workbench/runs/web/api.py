"""JSON and file endpoints of the runs pages: chart series for a step range, compare curves, exports."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

from django.http import JsonResponse, StreamingHttpResponse

from .. import selectors
from ..models import MetricPoint, Run
from ..telemetry.series import series_downsample, series_keys
from .compare import run_ids_param
from .freshness import data_version, shared_response

MAX_KEYS = 64


STEP_LIMIT = 2**31 - 1  # steps are IntegerField


class BadParameter(ValueError):
    """A query parameter the endpoint cannot use: answered with 400 and this message."""


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value not in (None, "") else None
    except (ValueError, OverflowError):  # "inf" overflows int(), "nan" and words are ValueErrors
        return None


def _step(request, name: str) -> int | None:
    """An optional step bound: a finite number within the step range (fractions round down)."""
    value = request.GET.get(name)
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except ValueError:
        raise BadParameter(f"{name} must be a number, got {value[:40]!r}") from None
    if not math.isfinite(number):
        raise BadParameter(f"{name} must be a finite number, got {value[:40]!r}")
    if abs(number) > STEP_LIMIT:
        raise BadParameter(f"{name} must be between {-STEP_LIMIT} and {STEP_LIMIT}")
    return int(number)


def _buckets(request) -> int:
    """About one bucket per 3 pixels of plot width (min, max and last each take a point)."""
    return min(2000, max(20, _int(request.GET.get("buckets")) or 200))


def _keys(request) -> list[str]:
    return [key for key in request.GET.get("keys", "").split(",") if key][:MAX_KEYS]


def _alerts(run: Run) -> list[dict]:
    return [
        {
            "step": a.step,
            "start_step": a.start_step,
            "rule": a.rule,
            "severity": a.severity,
            "message": a.message,
        }
        for a in run.alerts.all()
    ]


def _xy(points: list[tuple[int, float]]) -> dict[str, list]:
    steps, values = zip(*points, strict=True) if points else ((), ())
    return {"x": list(steps), "y": list(values)}


@dataclass(frozen=True)
class SeriesQuery:
    """What a chart asks for: series, step window, bucket count, and whether to list the run's series."""

    keys: tuple[str, ...]
    step_min: int | None
    step_max: int | None
    buckets: int
    available: bool

    @classmethod
    def from_request(cls, request) -> SeriesQuery:
        step_min, step_max = _step(request, "step_min"), _step(request, "step_max")
        available = bool(request.GET.get("available"))
        return cls(tuple(_keys(request)), step_min, step_max, _buckets(request), available)


def _series_json(run: Run, query: SeriesQuery) -> bytes:
    series = series_downsample(
        run=run,
        keys=list(query.keys),
        step_min=query.step_min,
        step_max=query.step_max,
        buckets=query.buckets,
    )
    payload = {
        "series": {
            key: dict(zip(("x", "y"), zip(*pts, strict=True) if pts else ((), ()), strict=True))
            for key, pts in series.items()
        },
        "alerts": _alerts(run),
        # Asked for by a dashboard opened before the run logged anything.
        "available": series_keys(run=run) if query.available else None,
        "last_step": run.last_step,
        "status": run.status,
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def run_series(request, pk: int):
    """{series: {key: {x, y}}, alerts, last_step, status} for the requested keys and step range: 304
    while nothing was stored since the client's copy, else built once per stored batch for every viewer."""
    run = selectors.run_get(user=request.user, pk=pk)
    try:
        query = SeriesQuery.from_request(request)
    except BadParameter as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    version = data_version(run, "series", query)
    return shared_response(request, version, lambda: _series_json(run, query), "application/json")


def compare_series(request):
    """One key's curve for each compared run, aligned by step."""
    runs = selectors.runs_for_compare(user=request.user, ids=run_ids_param(request.GET.getlist("runs")))
    key = request.GET.get("key", "")
    curves = []
    for run in runs:
        points = series_downsample(run=run, keys=[key], buckets=_buckets(request))[key] if key else []
        curves.append(
            {
                "id": run.pk,
                "name": run.name,
                "baseline": run.is_baseline,
                **_xy(points),
            }
        )
    return JsonResponse({"key": key, "runs": curves})


def _csv_lines(run: Run) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["step", "key", "value"])
    rows = MetricPoint.objects.filter(run=run).order_by("key", "step").values_list("step", "key", "value")
    for i, row in enumerate(rows.iterator(chunk_size=5000)):
        writer.writerow(row)
        if i % 1000 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def metrics_csv(request, pk: int):
    run = selectors.run_get(user=request.user, pk=pk)
    response = StreamingHttpResponse(_csv_lines(run), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-metrics.csv"'
    return response


def trajectories_jsonl(request, pk: int):
    run = selectors.run_get(user=request.user, pk=pk)
    records = run.trajectories.order_by("step", "key").values_list("step", "data")
    lines = (
        json.dumps({"step": step, **data}, ensure_ascii=False) + "\n"
        for step, data in records.iterator(chunk_size=500)
    )
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-trajectories.jsonl"'
    return response
