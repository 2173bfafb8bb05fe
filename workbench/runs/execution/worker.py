"""The worker side of a run: claim it, build the trainers config from the snapshot, train into the
database sink, and record how it ended. Handed on after its worker died (redelivered, or requeued by a
sweep once its lease expired), it resumes from the last checkpoint on whichever worker picks it up.
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from trainers.workbench_api import ArtifactStore, RunConfig, validate_config
from workbench.datasets.export import write_split_rows
from workbench.jobs.cores import cpu_ranks, ranks_here_error
from workbench.jobs.gpus import CUDA_ENV, cuda_visible, gpus_release, gpus_take, worker_gpu_indices

from ..config.bounds import OutOfBounds, run_config_bound
from ..models import Checkpoint, Run, RunStatus
from ..telemetry.alerts import run_alerts_detect
from .artifacts import CheckpointMirror, artifact_store, checkpoint_local
from .lease import LeaseKeeper, LeaseLost, lease_is_live
from .placement import run_gpus_asked
from .process_group import group_train
from .recovery import recovery_resumed, run_take_over
from .sink import DatabaseSink

logger = logging.getLogger(__name__)
LOG_TAIL_LINES = 200


class RunBusy(Exception):
    """Another live worker holds this run (its lease is valid); retry the delivery after the lease."""


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
    """Where this worker keeps the run's files (its own disk); checkpoints also go to the shared artifact
    store (settings.ARTIFACTS_URL), which lets another worker resume from them."""
    return Path(settings.VAR_DIR) / "runs" / str(run.pk)


@transaction.atomic
def run_claim(*, run_id: int, worker: str) -> Run | None:
    """Start a new attempt: mark the run running with a fresh lease and hold the GPUs it asks for on this
    worker's machine; None when it is already finished or cancelled, or was stranded on its last allowed
    attempt. GpusBusy (nothing written) when too few of this worker's GPUs are free."""
    run = Run.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.is_finished:
        return None
    if run.status == RunStatus.RUNNING and lease_is_live(run):
        raise RunBusy(f"run {run_id} is held by {run.worker}")
    if run.cancel_requested:
        run.status, run.finished_at = RunStatus.CANCELLED, timezone.now()
        run.save(update_fields=["status", "finished_at"])
        return None
    if run.status == RunStatus.RUNNING and not run_take_over(run=run, by=worker):
        return None
    run.status, run.worker, run.attempts = RunStatus.RUNNING, worker, run.attempts + 1
    run.phase = ""  # the earlier attempt's, until this one reports its own
    gpus_release(run_id=run.pk)  # an earlier attempt's, if its worker died holding them
    asked = run_gpus_asked(run)
    run.gpus = gpus_take(
        run=run, worker=worker, count=asked, indices=worker_gpu_indices(worker) if asked else ()
    )
    run.started_at = run.started_at or timezone.now()
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["status", "worker", "gpus", "attempts", "phase", "started_at", "heartbeat_at"])
    return run


def run_finish(*, run_id: int, attempt: int, status: str, error: str = "", log_tail: str = "") -> bool:
    """Record how the attempt ended; False (nothing written) when another attempt holds the run now."""
    held = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt)
    return bool(
        held.update(status=status, error=error, log_tail=log_tail, finished_at=timezone.now(),
                    heartbeat_at=timezone.now())
    )  # fmt: skip


def _export_rows(run: Run, directory: Path) -> dict[str, str]:
    """Write the pinned dataset version's train and eval rows as JSONL; returns the data config paths."""
    version = run.dataset_version
    if version is None:
        return {}
    paths = {}
    for split, key in (("train", "train_path"), ("eval", "eval_path")):
        path = write_split_rows(version, split, directory / f"{split}.jsonl")
        if path.stat().st_size:
            paths[key] = str(path)
    return paths


def _export_conversations(run: Run, directory: Path) -> str | None:
    """Write the pinned SFT data's train conversations as the JSONL the SFT stage reads; returns its path."""
    version = run.sft_dataset_version
    if version is None:
        return None
    path = directory / "sft_data.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for row in version.rows.filter(split="train").iterator(chunk_size=2000):
            record = {"id": f"row{row.index}", "messages": row.messages, "answer": row.answer}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return str(path)


def execution_config(run: Run) -> RunConfig:
    """The snapshot within the operator's bounds (checked again: the row may have been edited since it was
    created), plus what only the worker knows: its run directory and the exported data files."""
    config = run_config_bound(run.config, team_id=run.team_id)
    ranks = cpu_ranks(config)
    error = None if ranks is None else ranks_here_error(ranks)
    if error:  # before torchrun starts one process per rank here
        raise OutOfBounds({"training.deepspeed.ranks": [error]})
    directory = run_dir(run)
    directory.mkdir(parents=True, exist_ok=True)
    data = {**config.get("data", {}), **_export_rows(run, directory)}
    if run.dataset_version_id is not None:
        data["prompt_key"] = "question"  # the export's own field name
    sft_data = _export_conversations(run, directory)
    if sft_data is not None and config.get("sft") is not None:
        config = {**config, "sft": {**config["sft"], "data_path": sft_data}}
    return validate_config({**config, "name": run.name, "output_dir": str(directory), "data": data})


def resume_point(run: Run, store: ArtifactStore | None = None) -> tuple[Checkpoint, Path] | None:
    """The newest recorded checkpoint this worker can read, in its run directory or downloaded there from
    the artifact store, with the local directory to resume from."""
    for checkpoint in run.checkpoints.order_by("-step"):
        local = checkpoint_local(checkpoint, run_dir=run_dir(run), store=store)
        if local is not None:
            return checkpoint, local
    return None


def run_execute(
    *, run_id: int, worker: str, train: Callable[..., Any], poll_interval: float = 1.0
) -> str | None:
    """Run one delivery of the training task; returns the final status (None if there was nothing to do,
    or when another attempt took the run over meanwhile: this one then stops without writing more)."""
    run = run_claim(run_id=run_id, worker=worker)
    if run is None:
        return None
    # The run's own GPUs; a CPU run on a worker that has GPUs sees none, so it cannot take another's.
    visible = run.gpus if run.gpus or worker_gpu_indices(worker) else None
    lease = LeaseKeeper(run.pk, run.attempts)
    lease.start()  # held until the attempt has recorded how it ended
    try:
        return _attempt(
            run, worker=worker, train=train, lease=lease, poll_interval=poll_interval, visible=visible
        )
    except LeaseLost as exc:
        logger.warning("%s: stopping without writing more", exc)
        return None
    finally:
        lease.stopped.set()
        lease.join()
        _release_quietly(run)


def _attempt(
    run: Run,
    *,
    worker: str,
    train: Callable[..., Any],
    lease: LeaseKeeper,
    poll_interval: float,
    visible: list[int] | None,
) -> str | None:
    """Train from the newest readable checkpoint and record how the attempt ended (LeaseLost propagates)."""
    tail, cancel = LogTail(), CancelPoller(run.pk, interval=poll_interval)
    sink = DatabaseSink(run.pk, attempt=run.attempts)
    try:
        with tail.capture(), cuda_visible(visible):
            config, store = execution_config(run), artifact_store()
            sink.checkpoints = CheckpointMirror(
                run.pk, run_dir(run), store=store, keep=config.checkpoint.keep
            )
            checkpoint, resume_from = resume_point(run, store) or (None, None)
            if checkpoint is not None:
                sink.checkpoints.fetch_best()
            recovery_resumed(run=run, worker=worker, step=checkpoint.step if checkpoint else 0)
            start = f"resuming from step {checkpoint.step}" if checkpoint else "from the start"
            logger.info("run %s: attempt %s on %s, %s", run.pk, run.attempts, worker, start)
            logger.info("run %s: GPUs %s (%s=%s)", run.pk, run.gpus, CUDA_ENV, os.environ.get(CUDA_ENV))
            if config.training.engine == "deepspeed":  # N ranks under torchrun; rank 0 has the sink
                result = group_train(run, config, run_dir=run_dir(run), resume_from=resume_from, lease=lease)
                cancel.cancelled = result.cancelled
            else:
                result = train(
                    config,
                    sink=sink,
                    should_stop=lease.guard(cancel),
                    resume_from=str(resume_from) if resume_from else None,
                )
            sink.close()
    except LeaseLost:
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        _close_quietly(sink)
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        run_finish(run_id=run.pk, attempt=run.attempts, status=RunStatus.FAILED, error=error,
                   log_tail=_tail(tail, exc))  # fmt: skip
        return RunStatus.FAILED
    # The loop also stops itself on an echo-trap alert when the run was configured so.
    by_alert = not cancel.cancelled and bool(getattr(result, "stopped", False))
    status = RunStatus.CANCELLED if cancel.cancelled or by_alert else RunStatus.SUCCEEDED
    note = "Stopped by an echo-trap alert (echo_trap.on_alert = stop)." if by_alert else ""
    run_alerts_detect(run=run)
    if not run_finish(run_id=run.pk, attempt=run.attempts, status=status, error=note, log_tail=tail.text()):
        return None
    return status


def _tail(tail: LogTail, exc: BaseException) -> str:
    return (tail.text() + "\n" + "".join(traceback.format_exception(exc))).strip()[-20_000:]


def _release_quietly(run: Run) -> None:
    """Free the attempt's GPUs; if the database is away, the next sweep frees them (recovery.gpus_prune)."""
    try:
        gpus_release(run_id=run.pk, attempt=run.attempts)
    except Exception:
        logger.exception("could not free the GPUs of run %s attempt %s", run.pk, run.attempts)


def _close_quietly(sink: DatabaseSink) -> None:
    """Keep what can still be stored; a dead database must not hide the run's own error."""
    try:
        sink.close()
    except Exception:
        logger.exception("could not flush the last batch of run %s", sink.run_id)
