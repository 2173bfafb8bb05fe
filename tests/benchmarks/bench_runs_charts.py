"""Benchmark: a chart request on a run of 100k steps x 20 series must take < 150 ms of server time.

Plain script (not collected by pytest): seeds the run once with PostgreSQL COPY, builds the rollup
pyramid, then times full-range and zoomed chart requests through the whole Django stack (middleware,
login, team scoping, downsampling, JSON) with the test client, i.e. server time without the network.
Usage: DATABASE_URL=postgres://... python tests/benchmarks/bench_runs_charts.py [--steps N] [--series N]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django

django.setup()

from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.urls import reverse  # noqa: E402
from runs_bench_support import bench_client, cpu_per_request_ms, timed  # noqa: E402

from workbench.runs.models import MetricPoint, Run  # noqa: E402
from workbench.runs.telemetry.rollups import rollups_rebuild  # noqa: E402

TARGET_MS = 150.0


def series_names(count: int) -> list[str]:
    return [f"bench/series_{i:02d}" for i in range(count)]


def seed(run: Run, steps: int, series: int) -> None:
    """COPY steps x series points (noisy curves with occasional spikes), then build the pyramid."""
    started = time.perf_counter()
    table = MetricPoint._meta.db_table
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} (run_id, key, step, value) FROM STDIN") as copy,
    ):
        for s, key in enumerate(series_names(series)):
            for step in range(steps):
                spike = 25.0 if (step * 7919 + s) % 9973 == 0 else 0.0
                copy.write_row((run.pk, key, step, math.sin(step / 500 + s) + spike + (step % 13) / 100))
    copied = time.perf_counter()
    rollups_rebuild(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(last_step=steps - 1)
    print(f"seeded {steps * series:,} points by COPY in {copied - started:.1f} s, "
          f"rollups in {time.perf_counter() - copied:.1f} s")  # fmt: skip


def bench_run(steps: int, series: int) -> Run:
    from workbench.accounts.models import Team

    team, _ = Team.objects.get_or_create(name="bench")
    name = f"bench-charts-{steps}x{series}"
    run = Run.objects.filter(team=team, name=name).first()
    if run is None or MetricPoint.objects.filter(run=run).count() != steps * series:
        if run is not None:
            with connection.cursor() as cursor:  # the ORM's cascade would load millions of rows
                cursor.execute(f"DELETE FROM {MetricPoint._meta.db_table} WHERE run_id = %s", [run.pk])
            run.delete()
        run = Run.objects.create(team=team, name=name, config={"bench": True}, status="succeeded")
        seed(run, steps, series)
    return Run.objects.get(pk=run.pk)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--series", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=200, help="the dashboard asks for ~plot width / 3")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        print("needs PostgreSQL: set DATABASE_URL", file=sys.stderr)
        return 2
    run = bench_run(args.steps, args.series)
    client = bench_client(run)
    url = reverse("runs:series", args=[run.pk])
    keys = ",".join(series_names(args.series))
    cases = {
        "full range, all series": "",
        "zoom 10%, all series": "&step_min=40000&step_max=49999",
        "zoom 1k steps, all series": "&step_min=50000&step_max=50999",
    }
    worst = 0.0
    for label, window in cases.items():
        address = f"{url}?keys={keys}&buckets={args.buckets}{window}"

        def request(address=address):
            cache.clear()  # a step's chart data is built once for every viewer: time that, not the cache
            response = client.get(address)
            assert response.status_code == 200, response.status_code

        ms = timed(request, args.repeat)
        median, p95 = statistics.median(ms), sorted(ms)[int(0.95 * (len(ms) - 1))]
        cpu = cpu_per_request_ms(request, args.repeat)
        worst = max(worst, cpu)
        print(f"{label:28s} wall median {median:6.1f} ms  p95 {p95:6.1f} ms   server CPU {cpu:6.1f} ms")
    verdict = "PASS" if worst < TARGET_MS else "FAIL"
    load = os.getloadavg()[0]
    print(f"{verdict}: worst server CPU per request {worst:.1f} ms (< {TARGET_MS:.0f} ms); load {load:.1f}")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
