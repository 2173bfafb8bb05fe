"""Reads for the status page: database, broker, online workers; and job progress."""

from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import QuerySet
from django.utils import timezone

from workbench.celery_app import app as celery_app
from workbench.jobs.models import GpuAssignment, WorkerHeartbeat


def workers_online(*, ttl: float | None = None) -> QuerySet[WorkerHeartbeat]:
    """Workers whose heartbeat is younger than ttl seconds (WORKER_HEARTBEAT_TTL by default)."""
    ttl = settings.WORKER_HEARTBEAT_TTL if ttl is None else ttl
    return WorkerHeartbeat.objects.filter(last_seen__gte=timezone.now() - timedelta(seconds=ttl))


def database_status() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return {"ok": False, "vendor": connection.vendor, "error": str(exc)}
    return {"ok": True, "vendor": connection.vendor, "name": str(connection.settings_dict["NAME"])}


def broker_status() -> dict:
    """Connect to the broker once with a short timeout; the URL is shown with its password masked."""
    conn = celery_app.connection_for_write(connect_timeout=2)
    info = {"transport": conn.transport_cls, "url": conn.as_uri()}
    try:
        with conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # kombu raises transport-specific errors
        return {**info, "ok": False, "error": str(exc)}
    return {**info, "ok": True}


def broker_ping() -> dict | None:
    """Workers answering a broadcast ping within a second; Redis only (None on other transports)."""
    if not settings.REDIS_URL:
        return None
    try:
        return celery_app.control.inspect(timeout=1.0).ping() or {}
    except Exception as exc:  # an unreachable broker is reported, not raised
        return {"error": str(exc)}


def workers_gpu_slots(*, workers: list[WorkerHeartbeat], user) -> list[WorkerHeartbeat]:
    """Sets `gpu_slots` on each worker: its advertised GPUs, each with the assignment holding it (None when
    free) and whether the user may see that run (another team's run shows as taken, unnamed)."""
    from workbench.accounts.access import team_queryset
    from workbench.jobs.gpus import machine_of

    hosts = {machine_of(w.hostname) for w in workers}
    assignments = GpuAssignment.objects.filter(host__in=hosts)
    held = {(a.host, a.index): a for a in assignments.select_related("run")}
    visible = set(team_queryset(assignments, user).values_list("run_id", flat=True))
    for worker in workers:
        host = machine_of(worker.hostname)
        worker.gpu_slots = []
        for gpu in worker.gpus:
            assignment = held.get((host, gpu.get("index")))
            shown = assignment is not None and assignment.run_id in visible
            worker.gpu_slots.append({"gpu": gpu, "assignment": assignment, "visible": shown})
    return workers
