"""Celery tasks of the runs app: thin, they load by id and call the execution service."""

from __future__ import annotations

from celery import shared_task

from .execution import run_execute


# acks_late + reject_on_worker_lost: a worker killed mid-run gives the message back, and the next
# delivery resumes from the run's last checkpoint.
@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name="workbench.runs.tasks.train_run")
def train_run(self, run_id: int) -> str | None:
    from trainers.training.loop import train  # torch is imported on the worker only when a run starts

    return run_execute(run_id=run_id, worker=self.request.hostname or "", train=train)
