"""A real Celery worker process for integration tests (no eager mode)."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parents[3]


def database_url_for(settings_dict: dict) -> str:
    """A DATABASE_URL naming the same PostgreSQL database the tests use (the test_ one)."""
    auth = quote(settings_dict["USER"] or "")
    if settings_dict["PASSWORD"]:
        auth += ":" + quote(settings_dict["PASSWORD"])
    host = settings_dict["HOST"] or "127.0.0.1"
    port = settings_dict["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{settings_dict['NAME']}"


class WorkerProcess:
    """`celery -A workbench worker` with a unique node name and its log in log_dir; stop() or kill()."""

    def __init__(self, *, env: dict, log_dir: Path, queues: str = "gpu,rollout,cpu", pool: str = "solo"):
        self.env, self.queues, self.pool = env, queues, pool
        self.hostname = f"wbtest-{uuid.uuid4().hex[:8]}@localhost"
        self.log_path = Path(log_dir) / f"{self.hostname.split('@')[0]}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "celery", "-A", "workbench", "worker", "-Q", self.queues]
        command += ["-n", self.hostname, f"--pool={self.pool}", "--concurrency=1", "-l", "INFO"]
        command += ["--without-mingle", "--without-gossip"]  # no cluster chatter needed in tests
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_online(self, timeout: float = 90.0) -> None:
        """Block until the worker's first heartbeat row is in the database (it is consuming by then)."""
        from workbench.jobs.models import WorkerHeartbeat

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")
            if WorkerHeartbeat.objects.filter(hostname=self.hostname).exists():
                return
            time.sleep(0.2)
        raise TimeoutError(f"worker not online after {timeout} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown handlers run, as when a machine dies."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""
