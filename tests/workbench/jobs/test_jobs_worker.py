"""Against a real Celery worker process on Redis and PostgreSQL: a job end to end, and the status page."""

import os

import pytest

from tests.support.polling import wait_for
from workbench.jobs import services
from workbench.jobs.models import JobProgress, WorkerHeartbeat
from workbench.jobs.tasks import queue_check

pytestmark = [pytest.mark.services, pytest.mark.timeout(180)]


@pytest.mark.parametrize("queue", ["gpu", "rollout", "cpu"])
def test_a_job_on_each_queue_runs_on_the_worker_and_reports_progress(
    transactional_db, celery_worker, team, queue
):
    job = services.job_create(team=team, kind="queue_check")
    services.job_enqueue(job=job, task=queue_check, queue=queue)  # autocommit: sent at once
    succeeded = JobProgress.objects.filter(pk=job.pk, status="succeeded")
    finished = wait_for(succeeded.first, 30, "the job to succeed", celery_worker)
    assert finished.progress == 1.0
    assert f"Queue {queue} answered by {celery_worker.hostname}" in finished.message


def test_status_page_lists_the_live_worker_with_its_queues_and_redis_ping(
    transactional_db, celery_worker, client_for, member
):
    wait_for(WorkerHeartbeat.objects.filter(hostname=celery_worker.hostname).exists, 30, "a heartbeat")
    body = client_for(member).get("/status/").content.decode()
    assert celery_worker.hostname in body
    assert '<span class="tag">gpu</span> <span class="tag">rollout</span>' in body
    assert "pong" in body  # inspect().ping() answered over Redis
    assert body.count('<span class="ok">up</span>') == 2  # database and broker


def test_the_live_worker_publishes_its_sandbox_mode(transactional_db, celery_worker, client_for, member):
    """The worker starts a sandbox pool once (and closes it): root or user namespaces, never bare here."""
    expected = "root" if os.geteuid() == 0 else "userns"
    heartbeats = WorkerHeartbeat.objects.filter(hostname=celery_worker.hostname, sandbox__mode=expected)
    heartbeat = wait_for(heartbeats.first, 60, f"a heartbeat in {expected} mode", celery_worker)
    assert heartbeat.sandbox["isolation"]["filesystem"] is True
    body = client_for(member).get("/status/panel/").content.decode()
    assert f'<td class="sandbox"><span class="ok">{expected}</span></td>' in body


@pytest.mark.slow
def test_a_killed_worker_drops_off_the_status_page(
    transactional_db, start_worker, client_for, member, settings
):
    settings.WORKER_HEARTBEAT_TTL = 3
    worker = start_worker(queues="cpu")
    client = client_for(member)
    assert worker.hostname in client.get("/status/panel/").content.decode()
    worker.kill()  # SIGKILL: no shutdown handler removes the row; only the stale heartbeat tells
    dropped = lambda: worker.hostname not in client.get("/status/panel/").content.decode()  # noqa: E731
    wait_for(dropped, 15, "the killed worker to drop off the page", every=0.5)
    assert WorkerHeartbeat.objects.filter(hostname=worker.hostname).exists()


def test_a_stopped_worker_removes_its_heartbeat(transactional_db, start_worker):
    worker = start_worker(queues="cpu")
    worker.stop()  # warm shutdown runs the worker_shutdown handler
    assert not WorkerHeartbeat.objects.filter(hostname=worker.hostname).exists()
