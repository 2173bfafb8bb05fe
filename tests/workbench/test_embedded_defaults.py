"""Smoke test of the embedded defaults (`make run` without DATABASE_URL / REDIS_URL): SQLite and kombu's
filesystem transport, with a real worker process running a job end to end."""

import os
import signal
import subprocess
import sys

import pytest

from tests.workbench.support.worker import REPO_ROOT

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(240)]

ENQUEUE_AND_WAIT = """
import time
from django.db import transaction
from workbench.accounts.models import Team
from workbench.jobs import services
from workbench.jobs.models import JobProgress
from workbench.jobs.tasks import queue_check
from django.db import connection
with transaction.atomic():
    job = services.job_create(team=Team.objects.create(name="smoke"), kind="queue_check")
    services.job_enqueue(job=job, task=queue_check, queue="cpu")
deadline = time.monotonic() + 120
while time.monotonic() < deadline and not JobProgress.objects.get(pk=job.pk).is_finished:
    time.sleep(0.5)
job = JobProgress.objects.get(pk=job.pk)
print("RESULT", connection.vendor, job.status, job.message)
"""


@pytest.fixture
def embedded_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "REDIS_KEY_PREFIX"}}
    return {**env, "WORKBENCH_VAR_DIR": str(tmp_path / "var"), "WORKER_HEARTBEAT_INTERVAL": "1"}


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )


def test_a_job_runs_end_to_end_on_sqlite_and_the_filesystem_broker(embedded_env, tmp_path):
    migrated = manage(embedded_env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workbench",
                "worker",
                "-Q",
                "cpu",
                "-n",
                "smoke@localhost",
            ]
            + ["--pool=solo", "--without-mingle", "--without-gossip"],
            cwd=REPO_ROOT,
            env=embedded_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            done = manage(embedded_env, "shell", "-c", ENQUEUE_AND_WAIT)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    assert "RESULT sqlite succeeded Queue cpu answered by smoke@localhost" in done.stdout, (
        done.stderr + worker_log
    )
    assert (tmp_path / "var" / "db.sqlite3").exists()
    assert (tmp_path / "var" / "broker" / "queue").is_dir()


READ_THEN_WRITE = """
from django.db import transaction
from workbench.accounts.models import Team
team = Team.objects.get_or_create(name="writers")[0]
for _ in range(200):
    with transaction.atomic():  # a read, then a write: the lock upgrade SQLite cannot wait for
        current = Team.objects.get(pk=team.pk)
        Team.objects.filter(pk=current.pk).update(name="writers")
print("DONE")
"""


def test_processes_writing_at_once_wait_for_the_sqlite_lock(embedded_env):
    """The web server and workers write at once; deferred transactions used to fail "database is locked"."""
    assert manage(embedded_env, "migrate", "--noinput").returncode == 0
    assert manage(embedded_env, "shell", "-c", "from workbench.accounts.models import Team; "
                  "Team.objects.create(name='writers')").returncode == 0  # fmt: skip
    writers = [
        subprocess.Popen([sys.executable, "manage.py", "shell", "-c", READ_THEN_WRITE], cwd=REPO_ROOT,
                         env=embedded_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]  # fmt: skip
    results = [writer.communicate(timeout=180) for writer in writers]
    for out, err in results:
        assert "DONE" in out, err[-2000:]
