"""A pytest plugin that keeps the unmarked tests fast: a test whose call takes longer than the budget
(default 5 s; the `unmarked_test_budget_s` ini option, or WORKBENCH_TEST_BUDGET_S, which wins; 0 turns it
off) fails unless it is marked slow, services or browser, so `make test-fast` stays an edit loop.

It must not flake under load, so two corrections. What is measured is the call's wall time less the time
this process's threads spent runnable but waiting for a CPU (Linux's per-thread schedstat): time the test
sleeps, waits or computes counts, time other work took the cores away does not. CPU time alone would let
a test that sleeps pass; plain wall time grows with the machine's load. The waits of other processes a
test waits on (PostgreSQL, a subprocess) cannot be subtracted that way, so the budget also grows with the
load: it is multiplied by the 1-minute load average per CPU when that is over 1 (a 2-core machine at a
load of 8 gives a test four times the budget). On an idle machine the budget is what it says.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

BUDGET_ENV = "WORKBENCH_TEST_BUDGET_S"
BUDGET_INI = "unmarked_test_budget_s"
EXEMPT_MARKS = ("slow", "services", "browser")
TASKS = Path("/proc/self/task")


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = f"seconds an unmarked test's call may take ({BUDGET_ENV} overrides; 0: no budget)"
    parser.addini(BUDGET_INI, help_text, default="5")


def budget_s(config: pytest.Config) -> float:
    return float(os.environ.get(BUDGET_ENV) or config.getini(BUDGET_INI))


def load_scale() -> float:
    """The 1-minute load average per CPU this process may use, at least 1."""
    return max(1.0, os.getloadavg()[0] / len(os.sched_getaffinity(0)))


def queue_waits_s() -> dict[str, float]:
    """Seconds each live thread of this process has spent runnable but waiting for a CPU, by thread id."""
    waits = {}
    for schedstat in TASKS.glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended while read
            waits[schedstat.parent.name] = int(schedstat.read_text().split()[1]) / 1e9
    return waits


def waited_since(before: dict[str, float]) -> float:
    """The queue wait of this process's threads since `before` (threads that ended since count nothing)."""
    return sum(wait - before.get(thread, 0.0) for thread, wait in queue_waits_s().items())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    budget = budget_s(item.config)
    if budget <= 0 or any(item.get_closest_marker(mark) for mark in EXEMPT_MARKS):
        return (yield)
    started, before = time.monotonic(), queue_waits_s()
    result = yield  # a failing test fails as it is; only a passing one is timed
    wall = time.monotonic() - started
    took, scale = wall - waited_since(before), load_scale()
    if took > budget * scale:
        pytest.fail(
            f"the call took {took:.1f} s ({wall:.1f} s wall, less the waits for a CPU), over the "
            f"{budget:g} s of an unmarked test (x {scale:.1f} for the load): mark it slow (or "
            "services/browser for what it needs), or make it faster",
            pytrace=False,
        )
    return result
