"""Writes for job progress (called from tasks) and worker heartbeats (called from the worker)."""

import traceback
from contextlib import contextmanager

from django.db import transaction
from django.utils import timezone

from workbench.accounts.models import Team
from workbench.jobs.models import JobProgress, JobStatus, WorkerHeartbeat


def job_create(*, team: Team, kind: str, message: str = "Waiting for a worker") -> JobProgress:
    return JobProgress.objects.create(team=team, kind=kind, message=message)


def job_enqueue(*, job: JobProgress, task, queue: str | None = None, **task_kwargs) -> None:
    """Send task(job_id=..., **task_kwargs) once the current transaction commits (never before its rows)."""
    options = {"queue": queue} if queue else {}
    transaction.on_commit(lambda: task.apply_async(kwargs={"job_id": str(job.id), **task_kwargs}, **options))


def job_update(*, job_id, progress: float, message: str = "") -> None:
    """Mark running and record progress in [0, 1]; a plain UPDATE, cheap enough to call often."""
    JobProgress.objects.filter(pk=job_id).update(
        status=JobStatus.RUNNING,
        progress=min(max(progress, 0.0), 1.0),
        message=message[:500],
        updated_at=timezone.now(),
    )


def job_succeed(*, job_id, message: str = "Done") -> None:
    JobProgress.objects.filter(pk=job_id).update(
        status=JobStatus.SUCCEEDED, progress=1.0, message=message[:500], updated_at=timezone.now()
    )


def job_fail(*, job_id, error: str, message: str = "Failed") -> None:
    JobProgress.objects.filter(pk=job_id).update(
        status=JobStatus.FAILED, error=error, message=message[:500], updated_at=timezone.now()
    )


def worker_heartbeat_beat(
    *,
    hostname: str,
    queues: list[str],
    gpus: list[dict],
    pid: int,
    started_at,
    sandbox: dict | None = None,
    cpus: int = 0,
) -> None:
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname,
        defaults={
            "queues": queues,
            "gpus": gpus,
            "cpus": cpus,
            "sandbox": sandbox or {},
            "pid": pid,
            "started_at": started_at,
            "last_seen": timezone.now(),
        },
    )


def worker_heartbeat_remove(*, hostname: str) -> None:
    WorkerHeartbeat.objects.filter(hostname=hostname).delete()


@contextmanager
def job_failure_recorded(*, job_id):
    """In a task: an exception marks the job failed with its message and traceback, then propagates."""
    try:
        yield
    except Exception as exc:
        job_fail(job_id=job_id, error=traceback.format_exc(), message=f"{type(exc).__name__}: {exc}")
        raise
