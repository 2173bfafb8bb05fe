"""Sandbox fixtures: a small warm pool with tight limits, shared by a test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trainers.sandbox import SandboxLimits, WorkerPool

UID_BASE, UID_SPAN = 200_000, 10_000


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """Short wall and CPU limits so hostile snippets end quickly; every other limit at a small value."""
    limits = SandboxLimits(wall_s=2.0, cpu_s=2, memory_mb=256, max_processes=16, max_file_mb=4)
    with_pool = WorkerPool(limits, size=2, uid_base=UID_BASE, uid_span=UID_SPAN)
    yield with_pool
    with_pool.close()
