"""Waiting for what another process makes true (a worker, a server, a pool's thread): one helper, so every
test polls at the same pace and fails with the same message."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Logged(Protocol):
    """A process whose log's end explains a timeout (tests/workbench/support/worker.WorkerProcess)."""

    hostname: str

    def log_tail(self) -> str: ...


def wait_for(predicate: Callable[[], T], timeout: float, what: str, *logged: Logged, every: float = 0.2) -> T:
    """Call predicate every `every` s until it returns a truthy value, and return that value. After
    `timeout` s, fail with an AssertionError naming `what`, followed by the end of each process's log."""
    deadline = time.monotonic() + timeout
    while True:
        if value := predicate():
            return value
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- {process.hostname}\n{process.log_tail()}" for process in logged)
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{logs}")
        time.sleep(every)
