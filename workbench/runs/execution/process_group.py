"""A DeepSpeed run from the gpu queue: the task's attempt launches torchrun with one rank per GPU.

The task keeps what it holds for a single-process run (the claim, the lease, the GPU assignment in
CUDA_VISIBLE_DEVICES) and, instead of training itself, writes the attempt's launch file (the config
`execution_config` built and the checkpoint to resume from) and runs `torchrun --standalone
--nproc_per_node N -m workbench.runs.execution.rank <run id> <attempt>`. Every rank sets Django up and
trains the same config from the same checkpoint with `run_config`; rank 0 writes into the database sink
(fenced by the attempt's lease, checkpoints uploaded to the artifact store: the task downloaded the resume
point and the best checkpoint into the run directory before), the others log nothing. Each rank polls the
run's cancel flag (the loop stops every rank after the same step; rank 0 checkpoints) and records how it
ended in `rank-<r>.json` (rank_attempt.py).

How the attempt ends: every rank recorded a clean end -> succeeded or cancelled, as one process; a rank
recorded an exception and none was lost -> failed, with the group's log tail; a rank ended without a
record (SIGKILL, the OOM killer, a crash) -> the rank was lost like a worker that died: the run goes back
to its queue at once and the next attempt resumes from the last checkpoint (a run lost on its
RUNS_MAX_ATTEMPTS-th attempt fails). The other ranks end within the collective timeout
(`training.deepspeed.timeout_s`), or when torchrun stops them after one of theirs died.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from trainers.workbench_api import RunConfig
from workbench.jobs.gpus import gpus_release

from ..models import RecoveryOutcome, Run, RunRecovery, RunStatus
from .lease import LeaseKeeper, LeaseLost
from .recovery import train_send

logger = logging.getLogger(__name__)
RANK_MODULE = "workbench.runs.execution.rank"
GROUP_LOG_LINES = 120  # of the group's own log, in the attempt's log tail
STOP_GRACE_S = 60.0  # a group told to stop (lease lost) is killed after this long
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child must not dlopen


class RankLost(LeaseLost):
    """A rank of the group ended without a record (killed); the run went back to its queue for its next
    attempt, so this one, as after a lost lease, ends without writing more."""


class GroupFailed(Exception):
    """A rank raised: the attempt failed (the message is the first rank's error, with its rank)."""


@dataclass
class GroupResult:
    """How the group ended when no rank failed; reads like trainers' RunResult for `_attempt`."""

    stopped: bool
    cancelled: bool
    steps_done: int


def group_dir(run_dir: Path, attempt: int) -> Path:
    """Where an attempt's launch file, its ranks' end records and the group's log are kept."""
    return Path(run_dir) / "group" / f"attempt-{attempt}"


def group_command(ranks: int, run_id: int, attempt: int) -> list[str]:
    """torchrun with `ranks` local ranks of the rank entry point (a standalone rendezvous, free port)."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
        "-m", RANK_MODULE, str(run_id), str(attempt),
    ]  # fmt: skip


# --- the task's side ----------------------------------------------------------------------------------
def group_train(
    run: Run,
    config: RunConfig,
    *,
    run_dir: Path,
    resume_from: Path | None,
    lease: LeaseKeeper,
    poll_interval: float = 1.0,
) -> GroupResult:
    """Train the attempt on `config.training.deepspeed.ranks` ranks and wait for them, the lease renewed
    meanwhile by `lease`; GroupFailed when a rank raised, RankLost (the run requeued) when one was lost,
    LeaseLost (the group stopped) when another attempt took the run over."""
    directory = group_dir(run_dir, run.attempts)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("rank-*.json"):
        stale.unlink()
    launch = {
        "config": config.model_dump(mode="json"),
        "resume_from": str(resume_from) if resume_from else None,
    }
    (directory / "launch.json").write_text(json.dumps(launch))
    ranks = config.training.deepspeed.ranks
    log_path = directory / "group.log"
    logger.info("run %s: launching %s ranks (torchrun), log %s", run.pk, ranks, log_path)
    with log_path.open("wb") as log:
        group = subprocess.Popen(
            group_command(ranks, run.pk, run.attempts), stdout=log, stderr=subprocess.STDOUT,
            cwd=settings.BASE_DIR, env=_rank_env(), start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
        try:
            code = _wait(group, lease, poll_interval)
        finally:
            _stop(group)
    logger.info("run %s: the process group exited with %s\n%s", run.pk, code, _log_tail(log_path))
    held = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts).exists()
    if lease.lost.is_set() or not held:  # rank 0's fenced writes may have seen it before the lease keeper
        raise LeaseLost(f"run {run.pk}: attempt {run.attempts} lost its lease")
    records = {r: _read_record(directory / f"rank-{r}.json") for r in range(ranks)}
    # no record: the rank was killed (SIGKILL, the OOM killer, a crash), which is a lost process
    lost = [r for r, record in records.items() if record is None]
    failed = sorted((record for record in records.values() if record and record["error"]), key=_at)
    # every rank stopped cleanly on torchrun's SIGTERM, no cancel: the group was stopped from outside
    outside = (
        not lost
        and not failed
        and all(rec["terminated"] and not rec["cancelled"] for rec in records.values())
    )
    if lost or outside:
        requeued = group_requeue(run, lost=lost or list(records), exit_code=code)
        raise RankLost(f"run {run.pk}: rank(s) {lost or 'all'} lost ({requeued})")
    if failed or code != 0:
        first = (
            f"rank {failed[0]['rank']}: {failed[0]['error']}" if failed else f"torchrun exited with {code}"
        )
        raise GroupFailed(first)
    first = records[0]
    return GroupResult(stopped=first["stopped"], cancelled=first["cancelled"], steps_done=first["steps"])


def _rank_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(settings.BASE_DIR), env.get("PYTHONPATH")) if p)
    env["WORKBENCH_GROUP_PARENT"] = str(os.getpid())
    return env


def _die_with_parent() -> None:
    """In torchrun, before it starts: SIGTERM when the task's process dies (torchrun then stops its
    ranks), so a killed worker leaves no group behind to renew the lease through rank 0's writes."""
    with contextlib.suppress(AttributeError):
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait(group: subprocess.Popen, lease: LeaseKeeper, poll_interval: float) -> int:
    """torchrun's exit status; LeaseLost (after stopping the group) once another attempt holds the run."""
    while True:
        try:
            return group.wait(timeout=poll_interval)
        except subprocess.TimeoutExpired:
            pass
        if lease.lost.is_set():
            raise LeaseLost(f"run {lease.run_id}: attempt {lease.attempt} lost its lease")


def _stop(group: subprocess.Popen) -> None:
    """SIGTERM to torchrun (it passes it on to the ranks, which stop after their step), then SIGKILL."""
    if group.poll() is not None:
        return
    group.terminate()
    try:
        group.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        group.kill()
        group.wait()


def _log_tail(path: Path, lines: int = GROUP_LOG_LINES) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _at(record: dict[str, Any]) -> float:
    return record["at"]


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@transaction.atomic
def group_requeue(run: Run, *, lost: list[int], exit_code: int) -> str:
    """A lost rank is a lost process: the run goes back to its queue (recorded as a recovery, as a sweep
    does for a dead worker), or fails when this was its last allowed attempt. What was done, in words."""
    current = Run.objects.select_for_update().filter(
        pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts
    )
    held = current.first()
    if held is None:
        return "another attempt holds the run"
    recovery = {
        "run": held, "attempt": held.attempts, "worker": held.worker, "heartbeat_at": held.heartbeat_at,
        "last_step": held.last_step, "checkpoint_step": held.last_checkpoint_step, "detected_by": held.worker,
    }  # fmt: skip
    what = f"rank(s) {', '.join(map(str, lost))} of attempt {held.attempts} died (torchrun exit {exit_code})"
    if held.attempts >= settings.RUNS_MAX_ATTEMPTS:
        error = f"Gave up after {held.attempts} attempts (RUNS_MAX_ATTEMPTS): {what}."
        current.update(status=RunStatus.FAILED, error=error, finished_at=timezone.now())
        RunRecovery.objects.create(**recovery, outcome=RecoveryOutcome.GAVE_UP)
        gpus_release(run_id=held.pk, attempt=held.attempts)
        logger.error("run %s: %s", held.pk, error)
        return "failed: last allowed attempt"
    current.update(status=RunStatus.QUEUED, worker="")
    RunRecovery.objects.create(**recovery, outcome=RecoveryOutcome.REQUEUED)
    gpus_release(run_id=held.pk, attempt=held.attempts)
    train_send(held)  # inside the transaction: a failed send leaves the run running, for the sweep
    logger.warning("run %s: %s; requeued on %s", held.pk, what, held.queue)
    return "requeued"
