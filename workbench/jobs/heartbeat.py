"""Worker heartbeats: each Celery worker writes its WorkerHeartbeat row every few seconds.

Works on every broker (Redis or the filesystem transport): the status page reads rows, not broker
state, and a worker that dies stops beating and drops off the page after WORKER_HEARTBEAT_TTL.
"""

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from trainers.workbench_api import sandbox_probe
from workbench.jobs import services
from workbench.jobs.cores import cores_here
from workbench.jobs.gpus import GPUS_ENV, gpus_advertised

logger = logging.getLogger(__name__)

# Run in a child process: initialising CUDA in the worker's parent would break forked pool processes.
_GPU_PROBE = (
    "import json, torch\n"
    "gpus = []\n"
    "if torch.cuda.is_available():\n"
    "    for i in range(torch.cuda.device_count()):\n"
    "        p = torch.cuda.get_device_properties(i)\n"
    "        gpus.append({'index': i, 'name': p.name, 'memory_gb': round(p.total_memory / 2**30, 1)})\n"
    "print(json.dumps(gpus))\n"
)


def gpu_inventory(timeout: float = 120.0) -> list[dict]:
    """The GPUs torch.cuda reports on this machine ([] without CUDA or torch)."""
    if not any(Path(p).exists() for p in ("/dev/nvidiactl", "/proc/driver/nvidia")):
        return []  # no NVIDIA driver: skip importing torch in a child process
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GPU_PROBE], capture_output=True, text=True, timeout=timeout, check=True
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        logger.warning("GPU probe failed: %s", exc)
        return []


def sandbox_report() -> dict:
    """The isolation this worker's code sandbox gets (it starts one pool and closes it): the mode, or
    "refused" with the reason when pools here fail closed."""
    try:
        report = sandbox_probe()
    except Exception as exc:  # a probe that breaks must not stop the heartbeat
        logger.warning("Sandbox probe failed: %s", exc)
        return {"mode": "unknown", "error": str(exc)}
    if report["mode"] not in ("root", "userns"):
        logger.warning("Code sandbox on this worker: %s (%s)", report["mode"], report.get("error", ""))
    return report


class Heartbeat(threading.Thread):
    def __init__(self, *, hostname: str, queues: list[str], interval: float):
        super().__init__(name="workbench-heartbeat", daemon=True)
        self.hostname, self.queues, self.interval = hostname, queues, interval
        self.started_at = timezone.now()
        self.gpus: list[dict] = []
        self.sandbox: dict = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        if GPUS_ENV in os.environ:  # the operator's list is known before the probe answers
            self.gpus = gpus_advertised([])
        self.beat()  # visible at once; the GPU probe takes a few seconds
        self.gpus = gpus_advertised(gpu_inventory())
        self.sandbox = sandbox_report()
        while not self.stopped.is_set():
            self.beat()
            self.stopped.wait(self.interval)
        connection.close()

    def beat(self) -> None:
        close_old_connections()
        try:
            services.worker_heartbeat_beat(
                hostname=self.hostname,
                queues=self.queues,
                gpus=self.gpus,
                cpus=cores_here(),
                sandbox=self.sandbox,
                pid=os.getpid(),
                started_at=self.started_at,
            )
        except Exception:  # a database hiccup must not kill the worker; the next beat retries
            logger.exception("Worker heartbeat failed")


_heartbeat: Heartbeat | None = None


@worker_ready.connect
def heartbeat_start(sender, **kwargs) -> None:
    global _heartbeat
    queues = sorted(sender.app.amqp.queues.consume_from)
    _heartbeat = Heartbeat(
        hostname=sender.hostname, queues=queues, interval=settings.WORKER_HEARTBEAT_INTERVAL
    )
    _heartbeat.start()


@worker_shutdown.connect
def heartbeat_stop(sender, **kwargs) -> None:
    if _heartbeat is None:
        return
    _heartbeat.stopped.set()
    _heartbeat.join(timeout=5)
    close_old_connections()
    services.worker_heartbeat_remove(hostname=_heartbeat.hostname)
