"""Celery tasks of the runs app: thin, they load by id and call the execution service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from trainers.workbench_api import run_config

from .execution import RunBusy, run_execute


# acks_late + reject_on_worker_lost: a pool process killed mid-run gives the message back; a whole worker
# that dies cannot, and a sweep requeues its run once the lease expired (recovery.py). Either way the next
# delivery resumes from the run's last checkpoint. `run_config` trains the config exactly as `python -m
# trainers train` does (SFT warm start on a first delivery, then RL); it imports torch when it runs.
@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name="workbench.runs.tasks.train_run")
def train_run(self, run_id: int) -> str | None:
    try:
        return run_execute(run_id=run_id, worker=self.request.hostname or "", train=run_config)
    except RunBusy as exc:  # a duplicate delivery while the holder is alive: look again after the lease
        raise self.retry(exc=exc, countdown=settings.RUNS_LEASE_S, max_retries=None) from exc
