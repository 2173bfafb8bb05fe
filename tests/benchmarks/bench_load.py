"""Benchmark: the web server under load while a run streams into it, on loopback.

gunicorn serves the workbench as `make run` does (2 processes x 4 threads); a run of the bundled tiny model
trains as fast as it can in a worker process (load_bench_support.py: the worker's code path, metrics and
trajectories through DatabaseSink); 50 simulated users (asyncio + httpx, each its own session) poll it for
BENCH_LOAD_SECONDS (default 120): half watch the dashboard as the browser does (the status strip every
2 s, all charts' data when a step arrived, the page every 30 s), half read trajectory pages (the list,
then one trajectory, every 3 s). Meanwhile a probe reads the chart data every 0.25 s to see when each step
becomes visible. Then the run is cancelled and what the trainer logged is compared with what was stored.

Prints per page: requests, p50/p95/max latency, errors; the ingest lag (step handed to the sink by the
trainer -> visible in the chart data over HTTP); lost metric points and trajectories.
Targets: p95 < 300 ms on every page, zero errors, zero lost points.
Usage: DATABASE_URL=postgres://... python tests/benchmarks/bench_load.py [--users 50] [--seconds 120]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from trainers.demo.arithmetic import make_problem, write_rows  # noqa: E402
from workbench.runs.models import MetricPoint, Run, TrajectoryRecord  # noqa: E402

TARGET_P95_MS = 300.0
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
TRAJECTORY_LINK = re.compile(r'href="(/runs/\d+/trajectories/\d+/)"')


@dataclass
class Stats:
    """Latencies (ms) and errors per page, and when the probe first saw each step."""

    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    seen_at: dict[int, float] = field(default_factory=dict)
    probe_from: float = 0.0  # steps handed over before the probe's first read are not timed

    async def get(self, client: httpx.AsyncClient, page: str, url: str) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = await client.get(url)
        except httpx.HTTPError as exc:
            self.errors[page].append(f"{type(exc).__name__}: {exc}")
            return None
        self.ms[page].append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            self.errors[page].append(f"HTTP {response.status_code} {url}")
            return None
        return response


# Setup ---------------------------------------------------------------------------------------------


def bench_run(data_dir: Path, users: int) -> tuple[Run, list[str]]:
    """A run of the tiny model that trains until cancelled, and one logged-in session per user."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from workbench.accounts.models import Membership, Team
    from workbench.runs.services import run_create

    team, _ = Team.objects.get_or_create(name="bench-load")
    sessions = []
    for i in range(users):
        user, created = get_user_model().objects.get_or_create(username=f"bench-load-{i:02d}")
        if created:
            user.set_unusable_password()
            user.save()
        Membership.objects.get_or_create(user=user, team=team, defaults={"role": "member"})
        client = Client()
        client.force_login(user)
        sessions.append(client.cookies[settings.SESSION_COOKIE_NAME].value)
    rows = write_rows([make_problem(random.Random(0), i) for i in range(64)], data_dir / "train.jsonl")
    settings.WORKBENCH_DATA_ROOTS = [str(data_dir)]  # the operator's data root, for the launch check
    config = {
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 4, "samples_per_prompt": 4},
        "limits": {"max_new_tokens_per_turn": 12, "max_turns": 2},
        "training": {"steps": 100_000},
        "checkpoint": {"every_steps": 25},
        "data": {"train_path": str(rows)},
    }
    owner = Membership.objects.filter(team=team).first().user
    run = run_create(team=team, user=owner, name="bench-load", config=config, queue="cpu", launch=False)
    return run, sessions


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, log: Path) -> subprocess.Popen:
    """gunicorn as `make run` starts it; keep-alive outlasts the 2 s polls, as browsers reuse connections."""
    env = {**os.environ, "DJANGO_DEBUG": "0"}
    command = [str(Path(sys.executable).parent / "gunicorn"), "workbench.wsgi", "-b", f"127.0.0.1:{port}"]
    command += ["--workers", "2", "--threads", "4", "--timeout", "600", "--keep-alive", "5"]
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.3)
    server.kill()
    raise RuntimeError(f"gunicorn did not answer:\n{log.read_text(errors='replace')[-3000:]}")


def start_trainer(run: Run, stamps: Path, data_dir: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "WORKBENCH_DATA_ROOTS": str(data_dir)}
    command = [sys.executable, str(REPO / "tests" / "benchmarks" / "load_bench_support.py"), str(run.pk)]
    with log.open("wb") as out:
        return subprocess.Popen(
            command + [str(stamps)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )


# Simulated users -------------------------------------------------------------------------------------


def series_url(run: Run, keys: list[str]) -> str:
    return f"/runs/{run.pk}/series/?keys={','.join(keys)}&buckets=300"


async def dashboard_user(client: httpx.AsyncClient, run: Run, keys: list[str], stats: Stats, until: float):
    """The browser's dashboard: status strip every 2 s, the charts' data when a new step shows."""
    last_step, page_at = None, 0.0
    await asyncio.sleep(random.uniform(0, 2))  # users arrive at different moments
    while time.monotonic() < until:
        if time.monotonic() - page_at >= 30:
            await stats.get(client, "dashboard", f"/runs/{run.pk}/")
            page_at = time.monotonic()
        strip = await stats.get(client, "status strip", f"/runs/{run.pk}/status/")
        step = re.search(r'data-last-step="(\d*)"', strip.text) if strip is not None else None
        if step is None or step.group(1) != last_step:
            last_step = step.group(1) if step else None
            await stats.get(client, "chart data", series_url(run, keys))
        await asyncio.sleep(2 + random.uniform(-0.2, 0.2))


async def trajectory_user(client: httpx.AsyncClient, run: Run, stats: Stats, until: float):
    """A reader of trajectories: the inspector's list (run-wide, by reward), then one of its trajectories."""
    await asyncio.sleep(random.uniform(0, 3))
    while time.monotonic() < until:
        listing = await stats.get(client, "trajectory list", f"/runs/{run.pk}/trajectories/")
        links = TRAJECTORY_LINK.findall(listing.text) if listing is not None else []
        if links:
            await asyncio.sleep(random.uniform(0.5, 1.5))
            await stats.get(client, "trajectory", random.choice(links))
        await asyncio.sleep(3 + random.uniform(-0.3, 0.3))


async def lag_probe(client: httpx.AsyncClient, run: Run, stats: Stats, done: asyncio.Event):
    """Reads the reward series every 0.25 s and notes when each step first shows."""
    shown, stats.probe_from = 0, time.time()
    while not done.is_set():
        response = await stats.get(client, "probe (chart data)", series_url(run, ["reward/mean"]))
        steps = response.json()["series"].get("reward/mean", {}).get("x", []) if response is not None else []
        newest = max(steps, default=0)
        for step in range(shown + 1, newest + 1):
            stats.seen_at[step] = time.time()
        shown = max(shown, newest)
        await asyncio.sleep(0.25)


async def wait_for_keys(run: Run, trainer: subprocess.Popen, timeout: float = 600) -> list[str]:
    """The series the run has logged once its first step is stored (what the dashboard's charts ask for)."""
    from workbench.runs.series import series_keys

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and trainer.poll() is None:
        keys = await asyncio.to_thread(lambda: list(series_keys(run=run)))
        if keys:
            return keys[:64]
        await asyncio.sleep(0.5)
    raise RuntimeError("the run logged no step (see the trainer's log)")


async def warm_up(client: httpx.AsyncClient, run: Run, keys: list[str]) -> None:
    """Every page a few times, untimed: each server process imports and compiles what it serves lazily."""
    pages = [
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/status/",
        series_url(run, keys),
        f"/runs/{run.pk}/trajectories/",
    ]
    for _ in range(6):
        for response in await asyncio.gather(*(client.get(page) for page in pages)):
            response.raise_for_status()
        links = TRAJECTORY_LINK.findall(response.text)
        if links:
            (await client.get(links[0])).raise_for_status()


async def load(run: Run, sessions: list[str], trainer: subprocess.Popen, base: str, seconds: float) -> Stats:
    stats, done = Stats(), asyncio.Event()
    keys = await wait_for_keys(run, trainer)
    limits = httpx.Limits(max_connections=4)

    def client(session: str) -> httpx.AsyncClient:
        cookies = {settings.SESSION_COOKIE_NAME: session}
        return httpx.AsyncClient(base_url=base, cookies=cookies, timeout=30, limits=limits)

    clients = [client(session) for session in sessions]
    await warm_up(clients[0], run, keys)
    probe = asyncio.create_task(lag_probe(client(sessions[0]), run, stats, done))
    until = time.monotonic() + seconds
    users = [
        dashboard_user(c, run, keys, stats, until) if i % 2 == 0 else trajectory_user(c, run, stats, until)
        for i, c in enumerate(clients)
    ]
    await asyncio.gather(*users)
    await asyncio.to_thread(cancel_and_wait, run, trainer)
    await asyncio.sleep(0.5)  # one more probe after the last flush
    done.set()
    await probe
    for c in clients:
        await c.aclose()
    return stats


def cancel_and_wait(run: Run, trainer: subprocess.Popen) -> None:
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    trainer.wait(timeout=300)
    connection.close()


# Report ----------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def logged(stamps: Path) -> tuple[dict[int, float], set[tuple[int, str]], set[tuple[int, str]]]:
    """From the trainer's notes: when each step was handed over, its metric points and its trajectories."""
    handed, points, trajectories = {}, set(), set()
    for line in stamps.read_text().splitlines():
        note = json.loads(line)
        if "keys" in note:
            handed.setdefault(note["step"], note["t"])
            points.update((note["step"], key) for key in note["keys"])
        else:
            trajectories.update((note["step"], key) for key in note["trajectories"])
    return handed, points, trajectories


def report(stats: Stats, run: Run, stamps: Path, seconds: float) -> bool:
    print(f"{'page':22s} {'requests':>8s} {'p50 ms':>8s} {'p95 ms':>8s} {'max ms':>8s} {'errors':>7s}")
    pages_ok = True
    for page in sorted(set(stats.ms) | set(stats.errors)):
        ms, errors = stats.ms[page], stats.errors[page]
        p50, p95 = (percentile(ms, 0.5), percentile(ms, 0.95)) if ms else (float("nan"),) * 2
        print(f"{page:22s} {len(ms):8d} {p50:8.1f} {p95:8.1f} {max(ms, default=0):8.1f} {len(errors):7d}")
        pages_ok &= bool(ms) and p95 < TARGET_P95_MS and not errors
    for page, errors in stats.errors.items():
        for error in errors[:3]:
            print(f"  {page}: {error}")
    handed, points, trajectories = logged(stamps)
    stored_points = set(MetricPoint.objects.filter(run=run).values_list("step", "key"))
    stored_trajectories = set(TrajectoryRecord.objects.filter(run=run).values_list("step", "key"))
    lost_points, lost_trajectories = points - stored_points, trajectories - stored_trajectories
    timed = {step: t for step, t in handed.items() if t >= stats.probe_from}
    lags = [stats.seen_at[step] - t for step, t in timed.items() if step in stats.seen_at]
    unseen = len(timed) - len(lags)
    print(f"run: {len(handed)} steps in {seconds:.0f} s ({len(handed) / seconds:.2f}/s), "
          f"{len(points)} points, {len(trajectories)} trajectories streamed")  # fmt: skip
    if lags:
        p50, p95 = statistics.median(lags), percentile(lags, 0.95)
        print(f"ingest lag (handed to the sink -> visible over HTTP): p50 {p50:.2f} s, p95 {p95:.2f} s, "
              f"max {max(lags):.2f} s; {unseen} steps not shown")  # fmt: skip
    print(f"lost: {len(lost_points)} of {len(points)} points, "
          f"{len(lost_trajectories)} of {len(trajectories)} trajectories")  # fmt: skip
    return pages_ok and not lost_points and not lost_trajectories and unseen == 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_LOAD_SECONDS", "120")))
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        print("needs PostgreSQL: set DATABASE_URL", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        tmp = Path(tmp)
        run, sessions = bench_run(tmp, args.users)
        port = free_port()
        server = start_server(port, tmp / "gunicorn.log")
        trainer = start_trainer(run, tmp / "stamps.jsonl", tmp, tmp / "trainer.log")
        try:
            stats = asyncio.run(load(run, sessions, trainer, f"http://127.0.0.1:{port}", args.seconds))
        finally:
            for process in (trainer, server):
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)
        if trainer.returncode != 0:
            print((tmp / "trainer.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        ok = report(stats, Run.objects.get(pk=run.pk), tmp / "stamps.jsonl", args.seconds)
    load_avg = os.getloadavg()[0]
    verdict = "PASS" if ok else "FAIL"
    print(f"{verdict}: p95 < {TARGET_P95_MS:.0f} ms on every page, no errors, no lost points; "
          f"{args.users} users for {args.seconds:.0f} s; load {load_avg:.1f}")  # fmt: skip
    return 0 if ok and trainer.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
