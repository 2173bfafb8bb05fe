"""One tracker behind a bounded queue and a daemon thread: the training loop only ever enqueues.

A record that finds the queue full is dropped and counted; a call that raises is counted and logged.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from trainers.tracking.base import Tracker

logger = logging.getLogger(__name__)

_STOP = object()


class TrackerWorker:
    """Calls its tracker, in order, on a thread of its own; `put` never blocks."""

    def __init__(self, tracker: Tracker, size: int) -> None:
        self.tracker = tracker
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self.dropped = 0
        self.errors = 0
        self.thread = threading.Thread(target=self._drain, name=f"mirror-{tracker.name}", daemon=True)
        self.thread.start()

    def put(self, method: Callable[..., Any], *args: Any) -> None:
        """Queue `method(*args)`, or drop it when the tracker is too far behind."""
        try:
            self.queue.put_nowait((method, *args))
        except queue.Full:
            if not self.dropped:
                logger.warning("tracker %s is behind: dropping records", self.tracker.name)
            self.dropped += 1

    def stop(self, timeout_s: float) -> bool:
        """Finish the tracker after what is queued; False when it is still busy after `timeout_s`."""
        try:
            self.queue.put_nowait(_STOP)
        except queue.Full:
            self.dropped += 1  # the finish is dropped too: the thread is a daemon and dies with the process
            return False
        self.thread.join(timeout_s)
        return not self.thread.is_alive()

    def _call(self, method: Callable[..., Any], *args: Any) -> None:
        try:
            method(*args)
        except Exception:  # a tracker failing must never reach the run
            self.errors += 1
            if self.errors == 1 or self.errors % 100 == 0:
                name = getattr(method, "__name__", "call")
                logger.exception("tracker %s: %s failed (%d errors)", self.tracker.name, name, self.errors)

    def _drain(self) -> None:
        while (item := self.queue.get()) is not _STOP:
            self._call(*item)
        self._call(self.tracker.finish)
