"""DeepSpeed runs from the gpu queue on a real Celery worker: the task launches torchrun with one rank per
GPU of the run (fake GPUs "0,1" from WORKBENCH_GPUS; the ranks train on the CPU over gloo), rank 0 writes
into the database, and a rank SIGKILLed mid-run ends the attempt at once and the run resumes in a next
attempt from its last checkpoint with every step once."""

from __future__ import annotations

import os
import signal
import time
import uuid

import psutil
import pytest
from django.db.models import F

from tests.support.polling import wait_for
from tests.workbench.support.worker import WorkerProcess
from workbench.jobs.models import GpuAssignment
from workbench.runs.models import RecoveryOutcome, Run, RunStatus
from workbench.runs.services import run_cancel, run_create
from workbench.runs.tasks import train_run

from .test_runs_worker import reward_steps, run_now, tiny_config

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(420)]


def deepspeed_run(team, member, prompts, *, steps: int, queue: str) -> Run:
    """The tiny run on 2 ranks with ZeRO-2 and 2 GPUs; a dead rank fails a collective after 60 s at most."""
    config = tiny_config(steps)
    config["training"] = {**config["training"], "engine": "deepspeed",
                          "deepspeed": {"ranks": 2, "stage": 2, "timeout_s": 60}}  # fmt: skip
    config["resources"] = {"gpus": 2}
    config["checkpoint"] = {"every_steps": 2}
    run = run_create(
        team=team, user=member, name="zero", config=config, queue="cpu", launch=False, dataset_version=prompts
    )
    Run.objects.filter(pk=run.pk).update(queue=queue)  # only this test's worker consumes it
    return run


@pytest.fixture
def gpu_worker(worker_env, tmp_path):
    """A worker of its own with two fake GPUs on a queue of its own."""
    queue = f"ds-{uuid.uuid4().hex[:6]}"
    env = {**worker_env, "WORKBENCH_GPUS": "0,1", "OMP_NUM_THREADS": "1", "WORKBENCH_VAR_DIR": str(tmp_path)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    worker = WorkerProcess(env=env, log_dir=tmp_path, queues=queue)
    worker.start()
    try:
        worker.wait_online()
        yield worker, queue
    finally:
        worker.stop()


def ranks_of(worker: WorkerProcess) -> dict[int, psutil.Process]:
    """The worker's rank processes (under its torchrun), by RANK."""
    found = {}
    for process in psutil.Process(worker.process.pid).children(recursive=True):
        try:
            if "workbench.runs.execution.rank" in process.cmdline():
                found[int(process.environ()["RANK"])] = process
        except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError):
            continue
    return found


def test_deepspeed_run_trains_on_two_ranks(transactional_db, gpu_worker, team, member, prompts):
    worker, queue = gpu_worker
    run = deepspeed_run(team, member, prompts, steps=4, queue=queue)
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: run_now(run.pk).is_finished, 300, "the run to finish", worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail + worker.log_tail()
    assert run.attempts == 1 and run.gpus == [0, 1]
    assert reward_steps(run) == [1, 2, 3, 4]  # rank 0 alone logs each step, once
    assert run.trajectories.count() == 4 * 4  # the whole batch: both ranks' shares, gathered
    assert sorted(run.checkpoints.values_list("step", flat=True)) == [2, 4]
    assert all(c.url for c in run.checkpoints.all())  # uploaded to the artifact store
    assert "launching 2 ranks" in run.log_tail and "CUDA_VISIBLE_DEVICES=0,1)" in run.log_tail
    assert "rank 1 of 2, from the start" in run.log_tail  # the group's own log is in the tail
    assert not GpuAssignment.objects.exists()


def test_killed_rank_fails_the_attempt_and_the_run_resumes(
    transactional_db, gpu_worker, team, member, prompts
):
    worker, queue = gpu_worker
    run = deepspeed_run(team, member, prompts, steps=6, queue=queue)
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: (run_now(run.pk).last_checkpoint_step or 0) >= 2, 240, "a checkpoint", worker)
    ranks = wait_for(lambda: ranks_of(worker) if len(ranks_of(worker)) == 2 else None, 30, "2 ranks", worker)
    os.kill(ranks[1].pid, signal.SIGKILL)
    # torchrun sees its rank die and stops the other; the task hands the run back to its queue at once
    wait_for(lambda: run_now(run.pk).attempts == 2, 120, "the next attempt", worker)
    assert not ranks[0].is_running() or ranks[0].status() == psutil.STATUS_ZOMBIE
    wait_for(lambda: run_now(run.pk).is_finished, 300, "the resumed run to finish", worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail + worker.log_tail()
    assert run.attempts == 2
    assert reward_steps(run) == [1, 2, 3, 4, 5, 6]
    assert run.trajectories.count() == 6 * 4
    recovery = run.recoveries.get()
    assert (recovery.attempt, recovery.outcome) == (1, RecoveryOutcome.REQUEUED)
    assert recovery.resumed_from_step >= 2 and recovery.resumed_from_step == recovery.checkpoint_step
    assert not GpuAssignment.objects.exists()


def test_cancel_stops_every_rank_after_a_step(transactional_db, gpu_worker, team, member, prompts):
    worker, queue = gpu_worker
    run = deepspeed_run(team, member, prompts, steps=200, queue=queue)
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: (run_now(run.pk).last_step or 0) >= 1, 240, "a first step", worker)
    run_cancel(run=run_now(run.pk), user=member)
    wait_for(lambda: run_now(run.pk).is_finished, 120, "the cancelled run to stop", worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.CANCELLED, run.log_tail + worker.log_tail()
    assert run.attempts == 1 and not run.recoveries.exists()
    steps = reward_steps(run)
    assert steps == list(range(1, len(steps) + 1)) and len(steps) < 200
    assert run.last_checkpoint_step == steps[-1]  # rank 0 checkpointed the step every rank stopped after
    assert "rank 1 ended at step" in run.log_tail
    assert not GpuAssignment.objects.exists()


def test_a_rank_that_raises_fails_the_run_with_the_group_log(
    transactional_db, gpu_worker, team, member, prompts
):
    worker, queue = gpu_worker
    run = deepspeed_run(team, member, prompts, steps=2, queue=queue)
    config = {**run.config, "model": {**run.config["model"], "device": "cuda"}}
    Run.objects.filter(pk=run.pk).update(config=config)  # valid, but this CPU build of torch has no CUDA
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: run_now(run.pk).is_finished, 180, "the run to fail", worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.FAILED, run.log_tail + worker.log_tail()
    assert "GroupFailed: rank 0: AssertionError: Torch not compiled with CUDA enabled" in run.error
    assert "rank 0 failed" in run.log_tail and "Traceback" in run.log_tail  # the ranks' own log
    assert run.attempts == 1 and not run.recoveries.exists()  # an error, not a lost rank: no retry
    assert not GpuAssignment.objects.exists()


def test_a_lost_lease_stops_the_group_without_writing_more(
    transactional_db, gpu_worker, team, member, prompts
):
    worker, queue = gpu_worker
    run = deepspeed_run(team, member, prompts, steps=200, queue=queue)
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: (run_now(run.pk).last_step or 0) >= 1, 240, "a first step", worker)
    wait_for(lambda: len(ranks_of(worker)) == 2, 30, "2 ranks", worker)
    Run.objects.filter(pk=run.pk).update(attempts=F("attempts") + 1)  # as if a sweep had handed it on
    # the task's lease renewal notices, SIGTERMs torchrun, which stops both ranks
    wait_for(lambda: not ranks_of(worker), 120, "the ranks to end", worker)
    wait_for(lambda: "lost its lease" in worker.log_tail(200_000), 30, "the task to stop", worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.RUNNING and run.finished_at is None  # the old attempt wrote no end
    assert not run.recoveries.exists()
    last = run.last_step
    time.sleep(3)  # nothing is left to write
    assert run_now(run.pk).last_step == last
