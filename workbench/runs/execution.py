"""The worker side of a run: claim it, build the trainers config from the snapshot, train into the
database sink, and record how it ended. Redelivered after a crash, it resumes from the last checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from trainers.workbench_api import RunConfig, validate_config

from .alerts import run_alerts_detect
from .bounds import run_config_bound
from .models import Run, RunStatus
from .sink import DatabaseSink

logger = logging.getLogger(__name__)
LOG_TAIL_LINES = 200
# A running run whose heartbeat is younger than this belongs to a live worker: a second delivery of its
# task (a broker redelivering an unacknowledged message) waits instead of training it twice.
LEASE_S = float(os.environ.get("RUNS_LEASE_S", "30"))
HEARTBEAT_S = LEASE_S / 5


class RunBusy(Exception):
    """Another live worker holds this run; retry the delivery after the lease."""


class Heartbeat(threading.Thread):
    """Stamps the run's heartbeat while it trains, also through long steps that log nothing."""

    def __init__(self, run_id: int, interval: float = HEARTBEAT_S) -> None:
        super().__init__(name=f"run-{run_id}-heartbeat", daemon=True)
        self.run_id, self.interval = run_id, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                self.beat()
        finally:
            connection.close()  # this thread's own connection

    def beat(self) -> None:
        """Skip a beat rather than wait when a service holds the row (the next beat is soon)."""
        with transaction.atomic():
            rows = Run.objects.select_for_update(skip_locked=True).filter(pk=self.run_id)
            if rows.values_list("pk", flat=True):
                rows.update(heartbeat_at=timezone.now())


class LogTail(logging.Handler):
    """Keeps the last lines logged during a run, for the failed run's page."""

    def __init__(self, lines: int = LOG_TAIL_LINES) -> None:
        super().__init__(level=logging.INFO)
        self.lines: deque[str] = deque(maxlen=lines)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)

    @contextmanager
    def capture(self) -> Iterator[LogTail]:
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield self
        finally:
            root.removeHandler(self)


class CancelPoller:
    """The loop's `should_stop`: true once the run's cancel flag is set (read at most every `interval` s)."""

    def __init__(self, run_id: int, interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.run_id, self.interval, self._clock = run_id, interval, clock
        self._checked_at = -float("inf")
        self.cancelled = False

    def __call__(self) -> bool:
        if not self.cancelled and self._clock() - self._checked_at >= self.interval:
            self._checked_at = self._clock()
            self.cancelled = Run.objects.filter(pk=self.run_id, cancel_requested=True).exists()
        return self.cancelled


def run_dir(run: Run) -> Path:
    """Where the worker keeps the run's files; shared storage lets another worker resume from it."""
    return Path(settings.VAR_DIR) / "runs" / str(run.pk)


@transaction.atomic
def run_claim(*, run_id: int, worker: str) -> Run | None:
    """Mark the run running (again, on redelivery); None when it is already finished or cancelled."""
    run = Run.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.is_finished:
        return None
    alive = run.heartbeat_at is not None and (timezone.now() - run.heartbeat_at).total_seconds() < LEASE_S
    if run.status == RunStatus.RUNNING and alive:
        raise RunBusy(f"run {run_id} is held by {run.worker}")
    if run.cancel_requested:
        run.status, run.finished_at = RunStatus.CANCELLED, timezone.now()
        run.save(update_fields=["status", "finished_at"])
        return None
    run.status, run.worker, run.attempts = RunStatus.RUNNING, worker, run.attempts + 1
    run.started_at = run.started_at or timezone.now()
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["status", "worker", "attempts", "started_at", "heartbeat_at"])
    return run


def run_finish(*, run_id: int, status: str, error: str = "", log_tail: str = "") -> None:
    Run.objects.filter(pk=run_id).update(
        status=status, error=error, log_tail=log_tail, finished_at=timezone.now(), heartbeat_at=timezone.now()
    )


def _export_rows(run: Run, directory: Path) -> dict[str, str]:
    """Write the pinned dataset version's train and eval rows as JSONL; returns the data config paths."""
    version = run.dataset_version
    if version is None:
        return {}
    paths = {}
    for split, key in (("train", "train_path"), ("eval", "eval_path")):
        path = directory / f"{split}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for row in version.rows.filter(split=split).iterator(chunk_size=2000):
                record = {
                    "id": f"row{row.index}",
                    "question": row.prompt,
                    "answer": row.answer,
                    "tool_calls": row.tool_calls,
                    "initial_state": row.initial_state,
                    "ground_truth": row.ground_truth(),
                    "metadata": row.metadata,
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        if path.stat().st_size:
            paths[key] = str(path)
    return paths


def execution_config(run: Run) -> RunConfig:
    """The snapshot within the operator's bounds (checked again: the row may have been edited since it was
    created), plus what only the worker knows: its run directory and the exported data files."""
    config = run_config_bound(run.config, team_id=run.team_id)
    directory = run_dir(run)
    directory.mkdir(parents=True, exist_ok=True)
    data = {**config.get("data", {}), **_export_rows(run, directory)}
    if run.dataset_version_id is not None:
        data["prompt_key"] = "question"  # the export's own field name
    return validate_config({**config, "name": run.name, "output_dir": str(directory), "data": data})


def resume_point(run: Run) -> str | None:
    """The newest recorded checkpoint whose files this worker can read."""
    for checkpoint in run.checkpoints.order_by("-step"):
        if Path(checkpoint.path).exists():
            return checkpoint.path
    return None


def run_execute(
    *, run_id: int, worker: str, train: Callable[..., Any], poll_interval: float = 1.0
) -> str | None:
    """Run one delivery of the training task; returns the final status (None if there was nothing to do)."""
    run = run_claim(run_id=run_id, worker=worker)
    if run is None:
        return None
    tail, should_stop = LogTail(), CancelPoller(run.pk, interval=poll_interval)
    sink, heartbeat = DatabaseSink(run.pk), Heartbeat(run.pk)
    heartbeat.start()
    try:
        with tail.capture():
            logger.info("run %s: attempt %s on %s", run.pk, run.attempts, worker)
            result = train(
                execution_config(run), sink=sink, should_stop=should_stop, resume_from=resume_point(run)
            )
            sink.close()
    except Exception as exc:
        logger.exception("run %s failed", run_id)
        _close_quietly(sink)
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        run_finish(run_id=run_id, status=RunStatus.FAILED, error=error, log_tail=_tail(tail, exc))
        return RunStatus.FAILED
    finally:
        heartbeat.stopped.set()
        heartbeat.join()
    # The loop also stops itself on an echo-trap alert when the run was configured so.
    by_alert = not should_stop.cancelled and bool(getattr(result, "stopped", False))
    status = RunStatus.CANCELLED if should_stop.cancelled or by_alert else RunStatus.SUCCEEDED
    note = "Stopped by an echo-trap alert (echo_trap.on_alert = stop)." if by_alert else ""
    run_alerts_detect(run=run)
    run_finish(run_id=run_id, status=status, error=note, log_tail=tail.text())
    return status


def _tail(tail: LogTail, exc: BaseException) -> str:
    return (tail.text() + "\n" + "".join(traceback.format_exception(exc))).strip()[-20_000:]


def _close_quietly(sink: DatabaseSink) -> None:
    """Keep what can still be stored; a dead database must not hide the run's own error."""
    try:
        sink.close()
    except Exception:
        logger.exception("could not flush the last batch of run %s", sink.run_id)
