"""Rollout jobs of a run on the rollout queue: the trainers' `Dispatcher` over Celery.

The training task sends each job as `workbench.runs.tasks.rollout_chunk` (acks_late, on the rollout
queue), reads results from the result backend and sends a job again when its worker died (a started
job whose worker's heartbeat stopped), failed it, or gave no result within the run's job timeout. A
SIGKILLed worker's message also comes back from the broker later; results are keyed by job id and the
first one counts, so no trajectory is counted twice.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from celery import states
from celery.result import AsyncResult
from django.conf import settings
from django.db import connection

from trainers.workbench_api import (
    ArtifactStore,
    JobFailed,
    JobResult,
    ResubmittingDispatcher,
    RolloutJob,
)
from workbench.jobs.selectors import workers_online

ROLLOUT_TASK = "workbench.runs.tasks.rollout_chunk"
ROLLOUT_QUEUE = "rollout"


def rollout_weights_key(run_id: int) -> str:
    """A run's published weights' key in the artifact store."""
    return f"runs/{run_id}/rollout"


def rollout_weights_url(run_id: int) -> str:
    """Where a run's published weights live: under the artifact store every worker reads."""
    return ArtifactStore.from_url(settings.ARTIFACTS_URL).url_of(rollout_weights_key(run_id))


def rollout_weights_delete(run_id: int) -> None:
    """Drop a finished run's published weights (a resumed attempt publishes its own again)."""
    ArtifactStore.from_url(settings.ARTIFACTS_URL).delete(rollout_weights_key(run_id))


class CeleryDispatcher(ResubmittingDispatcher):
    """A run's rollout jobs as Celery tasks; `live_workers` counts the rollout queue's live workers."""

    poll_s = 0.05
    workers_every_s = 1.0  # how often the live workers are read while jobs run

    def __init__(self, *, run_key: str, weights_url: str, queue: str = ROLLOUT_QUEUE) -> None:
        self.run_key, self.weights_url, self.queue = run_key, weights_url, queue
        self._live: set[str] = set()
        self._live_at = -float("inf")
        self._expires = 3600.0  # seconds after sending when a job not yet started is discarded
        self._owner = threading.get_ident()  # the training task's thread

    def live_hostnames(self) -> set[str]:
        if time.monotonic() - self._live_at >= self.workers_every_s:
            online = workers_online().values_list("hostname", "queues")
            self._live = {host for host, queues in online if self.queue in (queues or [])}
            self._live_at = time.monotonic()
        return self._live

    def live_workers(self) -> int:
        return len(self.live_hostnames())

    def run_jobs(self, jobs: list[RolloutJob], *, timeout_s: float) -> list[JobResult]:
        from celery import current_app

        if not current_app.conf.result_backend:
            raise RuntimeError("remote rollouts need Celery's result backend (REDIS_URL)")
        self._expires = timeout_s * self.max_attempts
        try:
            return super().run_jobs(jobs, timeout_s=timeout_s)
        finally:
            if threading.get_ident() != self._owner:  # a prefetch thread (max_staleness): its own connection
                connection.close()

    def _send(self, job: RolloutJob, attempt: int) -> AsyncResult:
        from celery import current_app

        # A SIGKILLed worker's message comes back after the broker's visibility timeout (hours): by then
        # the step is long done, and a worker discards it unrun, as it was sent to expire.
        return current_app.send_task(
            ROLLOUT_TASK, args=[job.to_dict()], task_id=f"{job.job_id}.{attempt}", queue=self.queue,
            expires=self._expires,
        )  # fmt: skip

    def _result(self, handle: AsyncResult) -> JobResult | None:
        state = handle.state
        if state == states.SUCCESS:
            return JobResult.from_dict(handle.result)
        if state in states.PROPAGATE_STATES:
            raise JobFailed(f"{state}: {handle.result!r}")
        if state == states.STARTED:
            worker = _hostname(handle.info)
            if worker and worker not in self.live_hostnames():
                raise JobFailed(f"its worker {worker} stopped beating")
        return None

    def _drop(self, handle: AsyncResult) -> None:
        handle.forget()


def _hostname(info: Any) -> str | None:
    return info.get("hostname") if isinstance(info, dict) else None
