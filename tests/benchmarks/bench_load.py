"""Benchmark: the web server under load while a run streams into it, on loopback.

gunicorn serves the workbench as `make run` does (2 processes x 4 threads); a run of the bundled tiny model
trains as fast as it can in a worker process (load_bench_support.py: the worker's code path, metrics and
trajectories through DatabaseSink); 50 simulated users (asyncio + httpx, each its own session) poll it for
BENCH_LOAD_SECONDS (default 120): half watch the dashboard as runs/dashboard.js does (the status strip
every 2 s; when it shows a new step, the RL charts' data with the run's series list, then the SFT charts'
data; the page, then its charts, every 30 s as viewers come and go), half read trajectory pages (the
list, then one trajectory, every 3 s). Each user keeps what the server tagged with an ETag and
revalidates it, as the browser's cache does for htmx's and fetch()'s requests (304 Not Modified: the
kept copy). Meanwhile a probe reads the chart data every 0.25 s to see when each step becomes visible.
Then the run is cancelled and what the trainer logged is compared with what was stored.

Prints per page: requests (and how many answered 304), p50/p95/max latency, errors; the ingest lag (step
handed to the sink by the trainer -> visible in the chart data over HTTP); lost points and trajectories.
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
PAGE_KEYS = re.compile(r'<script id="series-keys" type="application/json">(.*?)</script>', re.S)
STRIP = re.compile(r'data-status="(\w*)" data-last-step="(\d*)" data-sft-step="(\d*)"')


@dataclass
class Browser:
    """One user's connection pool and HTTP cache: bodies that came with an ETag are kept and revalidated."""

    client: httpx.AsyncClient
    kept: dict[str, tuple[str, str]] = field(default_factory=dict)  # url -> (etag, body)

    async def get(self, url: str) -> tuple[int, str]:
        """(status, body); a 304 gives the kept body, as the browser hands it to the page."""
        etag, body = self.kept.get(url, (None, ""))
        response = await self.client.get(url, headers={"If-None-Match": etag} if etag else {})
        if response.status_code == 304 and etag:
            return 304, body
        if response.status_code == 200 and "ETag" in response.headers:
            self.kept[url] = (response.headers["ETag"], response.text)
        return response.status_code, response.text


@dataclass
class Stats:
    """Latencies (ms), 304s and errors per page, and when the probe first saw each step."""

    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    not_modified: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    seen_at: dict[int, float] = field(default_factory=dict)
    probe_from: float = 0.0  # steps handed over before the probe's first read are not timed

    async def get(self, browser: Browser, page: str, url: str) -> str | None:
        started = time.perf_counter()
        try:
            status, body = await browser.get(url)
        except httpx.HTTPError as exc:
            self.errors[page].append(f"{type(exc).__name__}: {exc}")
            return None
        self.ms[page].append((time.perf_counter() - started) * 1000)
        self.not_modified[page] += status == 304
        if status not in (200, 304):
            self.errors[page].append(f"HTTP {status} {url}")
            return None
        return body


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


def series_url(run: Run, keys: list[str], discover: bool = False) -> str:
    """A chart data request as dashboard.js makes it; `discover` also asks for the run's series list."""
    url = f"/runs/{run.pk}/series/?keys={','.join(keys[:64])}&buckets=300"
    return url + "&available=1" if discover else url


def chart_groups(keys: list[str]) -> tuple[list[str], list[str]]:
    """The RL and the SFT charts' series (fetched apart: each window ends at its own last step)."""
    return [k for k in keys if not k.startswith("sft/")], [k for k in keys if k.startswith("sft/")]


def strip_state(html: str | None) -> tuple[str, ...] | None:
    """(status, RL step, SFT step) as dashboard.js reads them from the status strip's data attributes."""
    found = STRIP.search(html or "")
    return found.groups() if found else None


async def draw_charts(browser: Browser, run: Run, keys: list[str], stats: Stats) -> None:
    """dashboard.js's refreshAll: the RL charts' data, then the SFT charts'."""
    for group in chart_groups(keys):
        if group:
            await stats.get(browser, "chart data", series_url(run, group))


async def follow(browser: Browser, run: Run, keys: list[str], stats: Stats) -> list[str]:
    """dashboard.js's follow, after new steps: the RL charts' data with the series list; new series are
    drawn with one more request. Returns the series the page knows."""
    rl, sft = chart_groups(keys)
    body = await stats.get(browser, "chart data", series_url(run, rl, discover=True))
    available = json.loads(body)["available"] if body else keys
    if available != keys:
        await draw_charts(browser, run, available, stats)
    elif sft:
        await stats.get(browser, "chart data", series_url(run, sft))
    return available


async def dashboard_user(browser: Browser, run: Run, stats: Stats, until: float):
    """runs/dashboard.js in a browser: the page draws its charts, the strip is polled every 2 s, and a
    strip that shows another RL or SFT step (or a run no longer running) makes the page redraw the charts
    and learn which series exist. A viewer (re)opens the page every 30 s."""
    page_at, progress = -float("inf"), None
    await asyncio.sleep(random.uniform(0, 2))  # users arrive at different moments
    while time.monotonic() < until:
        if time.monotonic() - page_at >= 30:
            page = await stats.get(browser, "dashboard", f"/runs/{run.pk}/")
            page_at, progress = time.monotonic(), (strip_state(page) or ("", "", ""))[1:]
            keys = json.loads(PAGE_KEYS.search(page).group(1)) if page else []
            await draw_charts(browser, run, keys, stats)
        strip = strip_state(await stats.get(browser, "status strip", f"/runs/{run.pk}/status/"))
        if strip is not None and (strip[1:] != progress or strip[0] != "running"):
            progress = strip[1:]
            keys = await follow(browser, run, keys, stats)
        await asyncio.sleep(2 + random.uniform(-0.2, 0.2))


async def trajectory_user(browser: Browser, run: Run, stats: Stats, until: float):
    """A reader of trajectories: the inspector's list (run-wide, by reward), then one of its trajectories."""
    await asyncio.sleep(random.uniform(0, 3))
    while time.monotonic() < until:
        listing = await stats.get(browser, "trajectory list", f"/runs/{run.pk}/trajectories/")
        links = TRAJECTORY_LINK.findall(listing) if listing is not None else []
        if links:
            await asyncio.sleep(random.uniform(0.5, 1.5))
            await stats.get(browser, "trajectory", random.choice(links))
        await asyncio.sleep(3 + random.uniform(-0.3, 0.3))


async def lag_probe(browser: Browser, run: Run, stats: Stats, done: asyncio.Event):
    """Reads the reward series every 0.25 s and notes when each step first shows."""
    shown, stats.probe_from = 0, time.time()
    while not done.is_set():
        body = await stats.get(browser, "probe (chart data)", series_url(run, ["reward/mean"]))
        steps = json.loads(body)["series"].get("reward/mean", {}).get("x", []) if body is not None else []
        newest = max(steps, default=0)
        for step in range(shown + 1, newest + 1):
            stats.seen_at[step] = time.time()
        shown = max(shown, newest)
        await asyncio.sleep(0.25)


async def wait_for_keys(run: Run, trainer: subprocess.Popen, timeout: float = 600) -> list[str]:
    """The series the run has logged once its first step is stored (what the dashboard's charts ask for)."""
    from workbench.runs.telemetry.series import series_keys

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

    def browser(session: str) -> Browser:
        cookies = {settings.SESSION_COOKIE_NAME: session}
        return Browser(httpx.AsyncClient(base_url=base, cookies=cookies, timeout=30, limits=limits))

    browsers = [browser(session) for session in sessions]
    await warm_up(browsers[0].client, run, keys)
    prober = browser(sessions[0])
    probe = asyncio.create_task(lag_probe(prober, run, stats, done))
    until = time.monotonic() + seconds
    users = [
        dashboard_user(b, run, stats, until) if i % 2 == 0 else trajectory_user(b, run, stats, until)
        for i, b in enumerate(browsers)
    ]
    await asyncio.gather(*users)
    await asyncio.to_thread(cancel_and_wait, run, trainer)
    await asyncio.sleep(0.5)  # one more probe after the last flush
    done.set()
    await probe
    for b in [*browsers, prober]:
        await b.client.aclose()
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
    header = ("page", "requests", "304", "p50 ms", "p95 ms", "max ms", "errors")
    print(f"{header[0]:22s} {header[1]:>8s} {header[2]:>6s}" + "".join(f" {h:>8s}" for h in header[3:]))
    pages_ok = True
    for page in sorted(set(stats.ms) | set(stats.errors)):
        ms, errors = stats.ms[page], stats.errors[page]
        p50, p95 = (percentile(ms, 0.5), percentile(ms, 0.95)) if ms else (float("nan"),) * 2
        print(f"{page:22s} {len(ms):8d} {stats.not_modified[page]:6d} {p50:8.1f} {p95:8.1f} "
              f"{max(ms, default=0):8.1f} {len(errors):8d}")  # fmt: skip
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
