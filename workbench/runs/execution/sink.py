"""The database sink: the trainers library's `Sink`, writing into PostgreSQL from a Celery worker."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connection, transaction

from trainers.workbench_api import Phase, Sink, Trajectory

from ..telemetry.ingest import (
    alerts_record,
    checkpoint_record,
    metrics_ingest,
    phase_record,
    trajectories_ingest,
)
from .artifacts import CheckpointMirror
from .lease import lease_hold

logger = logging.getLogger(__name__)
T = TypeVar("T")


class DatabaseSink(Sink):
    """Buffers points and trajectories and writes them in idempotent batches.

    A batch goes out when `flush_points` values or `flush_trajectories` trajectories are waiting, or
    `flush_seconds` have passed since the last write; checkpoints and alerts flush first, so what a
    checkpoint covers is always stored before the checkpoint row that a resume relies on. With `attempt`,
    every write is fenced by the run's lease: once another attempt holds the run, writes raise LeaseLost.
    With `checkpoints`, a checkpoint is uploaded to the shared artifact store before its row records its
    store URL, so any worker can resume from it.
    """

    def __init__(
        self,
        run_id: int,
        *,
        attempt: int | None = None,
        flush_points: int = 500,
        flush_trajectories: int = 256,
        flush_seconds: float = 2.0,
        retries: int = 3,
        retry_wait_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        checkpoints: CheckpointMirror | None = None,
    ) -> None:
        self.run_id, self.attempt, self.checkpoints = run_id, attempt, checkpoints
        self.flush_points = flush_points
        self.flush_trajectories = flush_trajectories
        self.flush_seconds = flush_seconds
        self.retries, self.retry_wait_s = retries, retry_wait_s
        self._clock = clock
        self._last_flush = clock()
        self._points: list[tuple[int, str, float]] = []
        self._sft_points: list[tuple[int, str, float]] = []
        self._trajectories: dict[int, list[Trajectory]] = {}

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._points.extend((step, key, value) for key, value in metrics.items() if _is_number(value))
        self._maybe_flush()

    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        """SFT steps are series of their own (sft/*) that leave the run's RL step where it is."""
        self._sft_points.extend((step, key, value) for key, value in metrics.items() if _is_number(value))
        self._maybe_flush()

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        named = {key if key.startswith("eval/") else f"eval/{key}": value for key, value in results.items()}
        self.log_metrics(step, named)

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        self._trajectories.setdefault(step, []).extend(trajectories)
        self._maybe_flush()

    def log_checkpoint(self, step: int, path: Path) -> None:
        self.flush()
        url = ""
        if self.checkpoints is not None and Path(path).is_dir():
            self._retrying(lambda: None)  # a superseded attempt uploads nothing (LeaseLost)
            url = self._in_store(lambda: self.checkpoints.upload(Path(path))) or ""
        self._retrying(lambda: checkpoint_record(run_id=self.run_id, step=step, path=str(path), url=url))
        if self.checkpoints is not None:
            self._in_store(self.checkpoints.prune)
            self._in_store(self.checkpoints.sync_best)

    def log_alerts(self, alerts: Sequence[Any]) -> None:
        if alerts:
            self.flush()
            self._retrying(lambda: alerts_record(run_id=self.run_id, alerts=alerts))

    def log_phase(self, phase: Phase) -> None:
        """What was logged before the phase is stored first: the strip never says "starting RL" beside an
        SFT progress that has not reached its last step."""
        self.flush()
        self._retrying(lambda: phase_record(run_id=self.run_id, phase=str(phase)))

    def flush(self) -> None:
        """Write what is buffered; buffers are cleared only after the write committed (a retry resends)."""
        if self._points:
            self._retrying(lambda: metrics_ingest(run_id=self.run_id, points=self._points))
            self._points = []
        if self._sft_points:
            points = self._sft_points
            self._retrying(lambda: metrics_ingest(run_id=self.run_id, points=points, advance_step=False))
            self._sft_points = []
        if self._trajectories:
            self._retrying(lambda: trajectories_ingest(run_id=self.run_id, batches=self._trajectories))
            self._trajectories = {}
        self._last_flush = self._clock()

    def _retrying(self, write: Callable[[], Any]) -> None:
        """A dropped database connection costs a reconnect, not the run: every batch is an idempotent
        upsert, so sending it again after a failure that may or may not have committed is safe."""
        for tries in range(self.retries + 1):
            try:
                self._fenced(write)
                return
            except (OperationalError, InterfaceError):
                if tries == self.retries:
                    raise
                connection.close()
                time.sleep(self.retry_wait_s * (tries + 1))

    def _in_store(self, action: Callable[[], T]) -> T | None:
        """An artifact store call, tried again like a database write; a store that stays unreachable costs
        the run only its resumability elsewhere (None, logged): the checkpoint row gets no store URL."""
        for tries in range(self.retries + 1):
            try:
                return action()
            except Exception:
                if tries == self.retries:
                    logger.exception(
                        "run %s: the artifact store failed; this checkpoint stays local", self.run_id
                    )
                    return None
                time.sleep(self.retry_wait_s * (tries + 1))
        return None

    def _fenced(self, write: Callable[[], Any]) -> None:
        """The write, in one transaction with the check that this attempt still holds the run."""
        if self.attempt is None:
            write()
            return
        with transaction.atomic():
            lease_hold(run_id=self.run_id, attempt=self.attempt)
            write()

    def close(self) -> None:
        self.flush()
        if self.checkpoints is not None:  # the loop's last evaluation may have saved a new best
            self._in_store(self.checkpoints.sync_best)

    def _maybe_flush(self) -> None:
        waiting = sum(len(batch) for batch in self._trajectories.values())
        due = self._clock() - self._last_flush >= self.flush_seconds
        points = len(self._points) + len(self._sft_points)
        if points >= self.flush_points or waiting >= self.flush_trajectories or due:
            self.flush()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
