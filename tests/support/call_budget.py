"""A pytest plugin that keeps the unmarked tests fast: a test whose call takes longer than the budget
(default 5 s; the `unmarked_test_budget_s` ini option, or WORKBENCH_TEST_BUDGET_S, which wins; 0 turns it
off) fails unless it is marked slow, services or browser, so `make test-fast` stays an edit loop.

It must not flake under load, so two corrections. What is measured is the call's wall time less the time
the test's thread spent runnable but waiting for a CPU (Linux's per-thread schedstat): time the test
sleeps, waits or computes counts, time other work took the core away does not. CPU time alone would let
a test that sleeps pass; plain wall time grows with the machine's load. Only the test's own thread's
waits count: other threads of the process (a torch pool, a reader thread an earlier test left) can be
runnable for the whole call, and subtracting their waits would let any test pass. The waits of other
processes a test waits on (PostgreSQL, a subprocess) cannot be subtracted that way, so the budget also
grows with the load: it is multiplied by the 1-minute load average per CPU when that is over 1 (a 2-core
machine at a load of 8 gives a test four times the budget). On an idle machine the budget is what it says.
"""

from __future__ import annotations

import os
import threading
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


def queue_wait_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (0 where Linux does not say)."""
    try:
        return int((TASKS / str(threading.get_native_id()) / "schedstat").read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    budget = budget_s(item.config)
    if budget <= 0 or any(item.get_closest_marker(mark) for mark in EXEMPT_MARKS):
        return (yield)
    started, before = time.monotonic(), queue_wait_s()
    result = yield  # a failing test fails as it is; only a passing one is timed
    wall = time.monotonic() - started
    took, scale = wall - (queue_wait_s() - before), load_scale()
    if took > budget * scale:
        pytest.fail(
            f"the call took {took:.1f} s ({wall:.1f} s wall, less the waits for a CPU), over the "
            f"{budget:g} s of an unmarked test (x {scale:.1f} for the load): mark it slow (or "
            "services/browser for what it needs), or make it faster",
            pytrace=False,
        )
    return result
