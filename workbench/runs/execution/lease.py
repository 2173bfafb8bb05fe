"""The lease a worker holds on the run it trains: the run's heartbeat, valid for RUNS_LEASE_S, and fenced
by the attempt number. Only the current attempt's worker may renew the lease or write the run's results;
a worker whose attempt was superseded (the run was swept and handed on while it was away) must stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from ..models import Run, RunStatus

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another attempt holds the run now; this worker must stop without writing anything more."""


def lease_s() -> float:
    return settings.RUNS_LEASE_S


def lease_expired_q(now: datetime) -> Q:
    """Running runs whose heartbeat is older than the lease: their worker died or cannot reach us."""
    stale = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - timedelta(seconds=lease_s()))
    return Q(status=RunStatus.RUNNING) & stale


def lease_is_live(run: Run, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    return run.heartbeat_at is not None and (now - run.heartbeat_at).total_seconds() < lease_s()


def lease_hold(*, run_id: int, attempt: int) -> None:
    """In the caller's transaction: renew the heartbeat if `attempt` still holds the run, else raise
    LeaseLost. The UPDATE keeps the run's row locked until that transaction ends, so a sweeper cannot
    hand the run on halfway through the caller's write."""
    held = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt)
    if not held.update(heartbeat_at=timezone.now()):
        raise LeaseLost(f"run {run_id}: attempt {attempt} no longer holds the run")


class LeaseKeeper(threading.Thread):
    """Renews the lease every RUNS_LEASE_S / 5 seconds, also through long steps that log nothing, and
    sets `lost` once another attempt holds the run."""

    def __init__(self, run_id: int, attempt: int, interval: float | None = None) -> None:
        super().__init__(name=f"run-{run_id}-lease", daemon=True)
        self.run_id, self.attempt = run_id, attempt
        self.interval = lease_s() / 5 if interval is None else interval
        self.stopped, self.lost = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval) and not self.lost.is_set():
                try:
                    self.beat()
                except DatabaseError:  # the next beat retries on a fresh connection
                    logger.warning("run %s: lease renewal failed", self.run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection

    def beat(self) -> None:
        """Skip a beat rather than wait when a writer holds the row (the next beat is soon)."""
        with transaction.atomic():
            rows = Run.objects.select_for_update(skip_locked=True).filter(pk=self.run_id)
            holder = rows.values_list("status", "attempts").first()
            if holder is None:
                return
            if tuple(holder) != (RunStatus.RUNNING, self.attempt):
                logger.warning("run %s: attempt %s lost its lease", self.run_id, self.attempt)
                self.lost.set()
                return
            rows.update(heartbeat_at=timezone.now())

    def guard(self, should_stop: Callable[[], bool]) -> Callable[[], bool]:
        """The loop's `should_stop`, raising LeaseLost once the lease is gone: the loop then ends without
        the checkpoint a normal stop writes."""

        def check() -> bool:
            if self.lost.is_set():
                raise LeaseLost(f"run {self.run_id}: attempt {self.attempt} lost its lease")
            return should_stop()

        return check
