"""Celery tasks of the runs app: thin, they load by id and call the execution service."""

from __future__ import annotations

from functools import partial

from celery import shared_task
from django.conf import settings

from trainers.workbench_api import RolloutWorkerState, run_config
from workbench.jobs.gpus import GpusBusy

from .execution.rollout_dispatch import CeleryDispatcher, rollout_weights_delete, rollout_weights_url
from .execution.rollout_job_bounds import rollout_job_bound
from .execution.worker import RunBusy, run_execute

_rollout_worker = None  # this process's RolloutWorkerState: the policies it keeps loaded between jobs


# acks_late + reject_on_worker_lost: a pool process killed mid-run gives the message back; a whole worker
# that dies cannot, and a sweep requeues its run once the lease expired (recovery.py). Either way the next
# delivery resumes from the run's last checkpoint. `run_config` trains the config exactly as `python -m
# trainers train` does (SFT warm start on a first delivery, then RL); it imports torch when it runs. A
# config with `rollout.backend: remote` sends its rollouts to the rollout queue's workers. max_retries=None
# on the task is what makes it wait for ever: None passed to retry() means the task's own (Celery's 3),
# and a 2-GPU run on a loaded machine gave up after 3 looks while a cancelled run was freeing its GPU.
@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    name="workbench.runs.tasks.train_run",
)
def train_run(self, run_id: int) -> str | None:
    dispatcher = CeleryDispatcher(
        run_key=f"run{run_id}", weights_url=rollout_weights_url(run_id), queue=settings.RUNS_ROLLOUT_QUEUE
    )
    try:
        status = run_execute(
            run_id=run_id,
            worker=self.request.hostname or "",
            train=partial(run_config, dispatcher=dispatcher),
        )
    except RunBusy as exc:  # a duplicate delivery while the holder is alive: look again after the lease
        raise self.retry(exc=exc, countdown=settings.RUNS_LEASE_S) from exc
    except GpusBusy as exc:  # too few free GPUs here now: back to the queue, for this or another worker
        raise self.retry(exc=exc, countdown=settings.RUNS_GPU_WAIT_S) from exc
    if status is not None:  # the run ended (None: another attempt holds it and may still publish)
        rollout_weights_delete(run_id)
    return status


# One chunk of a step's rollouts on the rollout queue. track_started: the trainer sees which worker holds
# the job and sends it again as soon as that worker's heartbeat stops; the first result of a job counts.
@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, track_started=True,
    name="workbench.runs.tasks.rollout_chunk",
)  # fmt: skip
def rollout_chunk(self, job: dict) -> dict:
    global _rollout_worker
    checked = rollout_job_bound(job)  # the payload is trusted in nothing: checked before anything is read
    if _rollout_worker is None:
        _rollout_worker = RolloutWorkerState(self.request.hostname or "rollout")
    return _rollout_worker.run(checked).to_dict()
