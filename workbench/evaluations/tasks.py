"""Celery tasks of the evaluations app: thin, they load by id and call the execution service."""

from __future__ import annotations

from celery import shared_task

from trainers.workbench_api import evaluate_config

from .execution import evaluation_execute
from .services import EVALUATE_TASK


# On the rollout queue (jobs/queues.py): an evaluation samples, it does not train. `evaluate_config` is what
# `python -m trainers eval` runs; it imports torch when it runs.
# acks_late + reject_on_worker_lost: a worker that dies mid-evaluation gives the message back, and its
# redelivery starts the evaluation again (execution.evaluation_claim).
@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name=EVALUATE_TASK)
def rollout_evaluate(self, evaluation_id: int) -> str | None:
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    return evaluation_execute(
        evaluation_id=evaluation_id, worker=self.request.hostname or "", evaluate=evaluate_config,
        redelivered=redelivered,
    )  # fmt: skip
