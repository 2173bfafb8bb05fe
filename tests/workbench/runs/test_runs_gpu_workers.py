"""GPU placement on a real Celery worker (prefork, two pool processes, one task per process as deployed)
given the fake GPU list "0,1" by WORKBENCH_GPUS: two 1-GPU runs train at once, each with its own
CUDA_VISIBLE_DEVICES as its training process saw it; a 2-GPU run sent meanwhile is sent back until both
are free; a 4-GPU run is refused at launch from the worker's heartbeat."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.core.exceptions import ValidationError

from tests.support.polling import wait_for
from tests.workbench.support.worker import REPO_ROOT, WorkerProcess
from workbench.jobs.models import GpuAssignment, WorkerHeartbeat
from workbench.runs.models import Run, RunStatus
from workbench.runs.services import run_cancel, run_create, run_gpus_check
from workbench.runs.tasks import train_run

from .test_runs_worker import run_now, tiny_config

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(420)]


class GpuWorker(WorkerProcess):
    """A worker as deploy/ starts GPU workers: prefork, a fresh pool process per run (CUDA is set up once
    per process), here with two pool processes."""

    def start(self) -> None:
        command = [sys.executable, "-m", "celery", "-A", "workbench", "worker", "-Q", self.queues]
        command += ["-n", self.hostname, "--pool=prefork", "--concurrency=2", "--max-tasks-per-child=1"]
        command += ["-l", "INFO", "--without-mingle", "--without-gossip"]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip


def gpu_run(team, member, prompts, *, name: str, gpus: int, steps: int, queue: str) -> Run:
    config = {**tiny_config(steps), "resources": {"gpus": gpus}}
    run = run_create(
        team=team, user=member, name=name, config=config, queue="cpu", launch=False, dataset_version=prompts
    )
    Run.objects.filter(pk=run.pk).update(queue=queue)  # only this test's worker consumes it
    return run


def test_runs_get_their_own_gpus_and_wait_for_free_ones(
    transactional_db, worker_env, tmp_path, team, member, prompts
):
    queue = f"gpus-{uuid.uuid4().hex[:6]}"
    env = {**worker_env, "WORKBENCH_GPUS": "0,1", "RUNS_GPU_WAIT_S": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    worker = GpuWorker(env=env, log_dir=tmp_path, queues=queue)
    worker.start()
    try:
        worker.wait_online()
        beat = WorkerHeartbeat.objects.get(hostname=worker.hostname)
        assert [gpu["index"] for gpu in beat.gpus] == [0, 1]
        with pytest.raises(ValidationError, match="asks for 4 GPUs; the live workers on queue"):
            run_gpus_check(gpus=4, queue=queue)
        run_gpus_check(gpus=2, queue=queue)  # what the worker has: accepted

        # The 1-GPU runs are too long to end by themselves during the test, however slow the machine:
        # they hold their GPUs until they are cancelled, so no step below races a run finishing early.
        short = gpu_run(team, member, prompts, name="short", gpus=1, steps=10_000, queue=queue)
        long = gpu_run(team, member, prompts, name="long", gpus=1, steps=10_000, queue=queue)
        both = gpu_run(team, member, prompts, name="both", gpus=2, steps=1, queue=queue)
        for run in (short, long):
            train_run.apply_async(args=[run.pk], queue=queue)
        running = lambda: Run.objects.filter(pk__in=[short.pk, long.pk], status=RunStatus.RUNNING).count()  # noqa: E731
        wait_for(lambda: running() == 2, 240, "both 1-GPU runs training at once", worker)
        train_run.apply_async(args=[both.pk], queue=queue)  # a pool process frees only when one ends
        run_cancel(run=short, user=member)  # frees a pool process and one GPU: the 2-GPU run finds one
        busy = lambda: "asks for 2 GPUs; 1 of" in worker.log_tail(200_000)  # noqa: E731
        wait_for(busy, 240, "the 2-GPU run sent back while one GPU is held", worker)
        run_cancel(run=long, user=member)
        for run in (short, long, both):
            wait_for(lambda run=run: run_now(run.pk).is_finished, 300, f"{run.name} to finish", worker)
    finally:
        worker.stop()
    short, long, both = (run_now(run.pk) for run in (short, long, both))
    assert [r.status for r in (short, long, both)] == [
        RunStatus.CANCELLED,
        RunStatus.CANCELLED,
        RunStatus.SUCCEEDED,
    ], worker.log_tail()
    assert sorted([short.gpus, long.gpus]) == [[0], [1]]
    for run in (short, long):
        assert f"CUDA_VISIBLE_DEVICES={run.gpus[0]})" in run.log_tail
    # The 2-GPU run was sent back while one GPU was busy, and trained on both once they were free.
    assert "GpusBusy" in worker.log_tail(200_000) and "asks for 2 GPUs; 1 of" in worker.log_tail(200_000)
    assert both.gpus == [0, 1] and "CUDA_VISIBLE_DEVICES=0,1)" in both.log_tail
    assert both.started_at >= max(short.finished_at, long.finished_at)
    assert not GpuAssignment.objects.exists()
