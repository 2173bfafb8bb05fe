"""Every Celery worker sweeps for stranded runs: at start, then every RUNS_SWEEP_INTERVAL_S seconds.

A thread in each worker rather than a beat schedule: there is no extra process to deploy, it works on
every broker, and any worker that survives recovers the runs of the ones that died (a single beat process
would be one more machine whose loss stops recovery). Sweeps from several workers at once are safe.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection

from .recovery import runs_sweep

logger = logging.getLogger(__name__)


class Sweeper(threading.Thread):
    def __init__(self, *, hostname: str, interval: float) -> None:
        super().__init__(name="workbench-run-sweeper", daemon=True)
        self.hostname, self.interval = hostname, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while True:
                self.sweep()
                if self.stopped.wait(self.interval):
                    return
        finally:
            connection.close()

    def sweep(self) -> None:
        close_old_connections()
        try:
            runs_sweep(sweeper=self.hostname)
        except Exception:  # a database or broker hiccup must not end the sweeps; the next one retries
            logger.exception("Sweeping for stranded runs failed")
            connection.close()


_sweeper: Sweeper | None = None


@worker_ready.connect
def sweeper_start(sender, **kwargs) -> None:
    global _sweeper
    _sweeper = Sweeper(hostname=sender.hostname, interval=settings.RUNS_SWEEP_INTERVAL_S)
    _sweeper.start()


@worker_shutdown.connect
def sweeper_stop(sender, **kwargs) -> None:
    if _sweeper is not None:
        _sweeper.stopped.set()
        _sweeper.join(timeout=5)
