"""Runs stranded by a dead worker: a sweep hands every run whose lease expired back to its queue exactly
once, or fails it after RUNS_MAX_ATTEMPTS attempts, and records each hand-over for the status page.

Two sweepers at once are safe: each run is handed on in its own transaction that locks the row
(`select_for_update(skip_locked=True)`: a row another sweeper holds is skipped, and the lease is checked
again once locked) and changes it with an UPDATE conditional on the attempt it saw, which decides alone
on SQLite, where rows are not locked and IMMEDIATE transactions serialise the sweepers instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from workbench.celery_app import app as celery_app
from workbench.jobs.gpus import gpus_release
from workbench.jobs.models import GpuAssignment

from ..models import RecoveryOutcome, Run, RunRecovery, RunStatus
from .lease import lease_expired_q

logger = logging.getLogger(__name__)
TRAIN_TASK = "workbench.runs.tasks.train_run"
SWEEP_BATCH = 100


def train_send(run: Run) -> None:
    """Send the run's training task to its queue again."""
    celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue)


def gpus_prune() -> int:
    """Free GPUs whose attempt is over however it ended (a worker killed between its claim and its own
    release, a run deleted): held only by the attempt its run is running now."""
    current = Q(run__status=RunStatus.RUNNING, attempt=F("run__attempts"))
    return GpuAssignment.objects.exclude(current).delete()[0]


def runs_sweep(*, sweeper: str, send: Callable[[Run], None] = train_send) -> list[RunRecovery]:
    """Hand on every run whose lease expired; returns what this sweeper did (others' runs are skipped)."""
    gpus_prune()  # GPUs of attempts that are over, whichever way (a worker killed before freeing them)
    now = timezone.now()
    expired = list(Run.objects.filter(lease_expired_q(now)).values_list("pk", flat=True)[:SWEEP_BATCH])
    return [recovery for pk in expired if (recovery := _recover(pk, sweeper=sweeper, send=send))]


@transaction.atomic
def _recover(run_id: int, *, sweeper: str, send: Callable[[Run], None]) -> RunRecovery | None:
    stranded = Run.objects.select_for_update(skip_locked=True).filter(lease_expired_q(timezone.now()))
    run = stranded.filter(pk=run_id).first()
    if run is None:  # renewed, finished, or another sweeper holds it
        return None
    if run.attempts >= settings.RUNS_MAX_ATTEMPTS:
        return _give_up(run, by=sweeper)
    current = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts)
    if not current.update(status=RunStatus.QUEUED, worker=""):
        return None
    gpus_release(run_id=run.pk, attempt=run.attempts)  # the dead worker's hold on its GPUs
    recovery = _record(run, by=sweeper, outcome=RecoveryOutcome.REQUEUED)
    # Inside the transaction: a send that fails rolls the hand-over back and the next sweep tries again.
    # A worker that receives the task first waits on the row lock in its claim until this commits.
    send(run)
    logger.warning("run %s: attempt %s on %s stranded; requeued on %s", run.pk, run.attempts, run.worker,
                   run.queue)  # fmt: skip
    return recovery


def run_take_over(*, run: Run, by: str) -> bool:
    """In a claim holding the run's row: a delivery found the lease expired. Records the take-over and
    answers whether the run may go on (False: that was its last allowed attempt, and it failed)."""
    if run.attempts >= settings.RUNS_MAX_ATTEMPTS:
        _give_up(run, by=by)
        return False
    _record(run, by=by, outcome=RecoveryOutcome.TAKEN_OVER)
    return True


def recovery_resumed(*, run: Run, worker: str, step: int) -> None:
    """The attempt that picked the run up after a hand-over started from checkpoint `step` (0: none)."""
    RunRecovery.objects.filter(
        run=run, resumed_at__isnull=True, outcome__in=[RecoveryOutcome.REQUEUED, RecoveryOutcome.TAKEN_OVER]
    ).update(resumed_at=timezone.now(), resumed_by=worker, resumed_from_step=step)


def _give_up(run: Run, *, by: str) -> RunRecovery | None:
    last = run.heartbeat_at.isoformat(timespec="seconds") if run.heartbeat_at else "never"
    error = (
        f"Gave up after {run.attempts} attempts (RUNS_MAX_ATTEMPTS): worker {run.worker or '?'} stopped "
        f"renewing the run's lease on attempt {run.attempts} (last heartbeat: {last})."
    )
    current = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts)
    if not current.update(status=RunStatus.FAILED, error=error, finished_at=timezone.now()):
        return None
    gpus_release(run_id=run.pk, attempt=run.attempts)
    logger.error("run %s: %s", run.pk, error)
    return _record(run, by=by, outcome=RecoveryOutcome.GAVE_UP)


def _record(run: Run, *, by: str, outcome: str) -> RunRecovery:
    return RunRecovery.objects.create(
        run=run,
        attempt=run.attempts,
        worker=run.worker,
        heartbeat_at=run.heartbeat_at,
        last_step=run.last_step,
        checkpoint_step=run.last_checkpoint_step,
        detected_by=by,
        outcome=outcome,
    )
