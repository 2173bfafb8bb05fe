"""Benchmark: the trajectory inspector's list with 1M stored trajectories must answer in < 100 ms.

Plain script (not collected by pytest): seeds one run with PostgreSQL COPY (15,625 steps x 8 groups x
8 samples), then times the selector behind the inspector's list for per-step and run-wide queries.
Usage: DATABASE_URL=postgres://... python tests/benchmarks/bench_runs_trajectories.py [--count N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
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

from workbench.runs.models import Run, TrajectoryRecord  # noqa: E402
from workbench.runs.selectors import trajectory_group, trajectory_list  # noqa: E402
from workbench.runs.trajectories.filters import TrajectoryFilters  # noqa: E402

TARGET_MS = 100.0
PER_STEP = 64  # 8 groups x 8 samples
TOOLS = ("calculator", "python", "search")
COLUMNS = (
    "run_id, step, key, group_id, sample_index, reward, advantage, correct, num_turns, num_tool_calls, "
    "num_failed_calls, length, tool_counts, final_answer, data"
)


def rows(run_id: int, count: int):
    """Synthetic records with realistic spreads of the filter columns and a small trajectory body."""
    rng = random.Random(0)
    for n in range(count):
        step, slot = divmod(n, PER_STEP)
        group, sample = divmod(slot, 8)
        tools = {name: rng.randint(1, 3) for name in TOOLS if rng.random() < 0.4}
        failed = rng.randint(0, sum(tools.values())) if tools and rng.random() < 0.2 else 0
        reward = round(rng.uniform(-1, 1), 4)
        body = {"uid": f"{step}-{slot}", "group_id": f"s{step}g{group}", "turns": [], "reward": reward}
        yield (
            run_id, step, f"s{step}g{group}/{sample}", f"s{step}g{group}", sample, reward,
            reward / 2, reward > 0, rng.randint(1, 6), sum(tools.values()), failed, rng.randint(16, 512),
            json.dumps(tools), f"answer {n}", json.dumps(body),
        )  # fmt: skip


def bench_run(count: int) -> Run:
    from workbench.accounts.models import Team

    team, _ = Team.objects.get_or_create(name="bench")
    name = f"bench-trajectories-{count}"
    run = Run.objects.filter(team=team, name=name).first()
    if run is not None and TrajectoryRecord.objects.filter(run=run).count() == count:
        return run
    if run is not None:
        with connection.cursor() as cursor:  # the ORM's cascade would load a million rows
            cursor.execute(f"DELETE FROM {TrajectoryRecord._meta.db_table} WHERE run_id = %s", [run.pk])
        run.delete()
    run = Run.objects.create(team=team, name=name, config={"bench": True}, status="succeeded")
    started = time.perf_counter()
    table = TrajectoryRecord._meta.db_table
    with connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({COLUMNS}) FROM STDIN") as copy:
            for row in rows(run.pk, count):
                copy.write_row(row)
        cursor.execute(f"ANALYZE {table}")
    print(f"seeded {count:,} trajectories by COPY in {time.perf_counter() - started:.1f} s")
    return run


def timed_stats(fn, repeat: int) -> tuple[float, float]:
    ms = timed(fn, repeat)
    return statistics.median(ms), sorted(ms)[int(0.95 * (len(ms) - 1))]


def deep_cursor(run: Run, pages: int) -> str:
    cursor = ""
    for _ in range(pages):
        cursor = trajectory_list(
            run=run, filters=TrajectoryFilters(), sort="-reward", cursor=cursor
        ).next_cursor
    return cursor


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        print("needs PostgreSQL: set DATABASE_URL", file=sys.stderr)
        return 2
    run = bench_run(args.count)
    step = args.count // PER_STEP // 2
    F = TrajectoryFilters
    cases = {
        "one step, by reward": (F(step=step), "-reward"),
        "one step, wrong + python": (F(step=step, correct=False, tool="python"), "-reward"),
        "run-wide, top reward": (F(), "-reward"),
        "run-wide, reward band + failed": (F(reward_min=0.2, reward_max=0.8, failed_call=True), "-reward"),
        "run-wide, used search, longest": (F(tool="search"), "-length"),
        "run-wide, wrong, >=4 turns": (F(correct=False, turns_min=4), "reward"),
        "one step, >=2 turns, by turns": (F(step=step, turns_min=2), "turns"),
        "run-wide, failed call, by turns": (F(failed_call=True), "-turns"),
        "run-wide, latest steps first": (F(), "-step"),
    }
    worst = 0.0
    for label, (filters, sort) in cases.items():
        median, p95 = timed_stats(
            lambda f=filters, s=sort: trajectory_list(run=run, filters=f, sort=s).items, args.repeat
        )
        worst = max(worst, p95)
        print(f"{label:34s} median {median:6.1f} ms  p95 {p95:6.1f} ms")
    cursor = deep_cursor(run, 200)
    median, p95 = timed_stats(
        lambda: trajectory_list(run=run, filters=F(), sort="-reward", cursor=cursor).items, args.repeat
    )
    worst = max(worst, p95)
    print(f"{'run-wide, page 201 by keyset':34s} median {median:6.1f} ms  p95 {p95:6.1f} ms")
    median, p95 = timed_stats(
        lambda: trajectory_group(run=run, step=step, group_id=f"s{step}g3"), args.repeat
    )
    worst = max(worst, p95)
    print(f"{'group view (8 samples, full JSON)':34s} median {median:6.1f} ms  p95 {p95:6.1f} ms")
    client = bench_client(run)
    pages = {
        "page: one step (HTML, 50 rows)": f"?step={step}",
        "page: run-wide failed calls by turns": "?failed_call=yes&sort=-turns",
    }
    for label, query in pages.items():
        address = reverse("runs:trajectories", args=[run.pk]) + query

        def request(address=address):
            cache.clear()  # the rows are rendered once per stored batch: time that render, not the cache
            assert client.get(address).status_code == 200

        median, p95 = timed_stats(request, args.repeat)
        cpu = cpu_per_request_ms(request, args.repeat)
        worst = max(worst, p95)
        print(f"{label:34s} median {median:6.1f} ms  p95 {p95:6.1f} ms  server CPU {cpu:6.1f} ms")
    verdict = "PASS" if worst < TARGET_MS else "FAIL"
    print(f"{verdict}: worst p95 {worst:.1f} ms (target < {TARGET_MS:.0f} ms)")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
