"""A warm pool of one-shot sandbox workers: a call costs a pipe round trip, not an interpreter start.

Each worker is started in the background with every limit already applied, serves exactly one call
and is discarded; the pool starts a replacement at once, so no state leaks between calls.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainers.sandbox.limits import SandboxLimits, SandboxResult
from trainers.sandbox.worker import sandbox_env

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Paths the snippet must not see: homes, runtime secrets, host-writable tmp dirs, the project.
DEFAULT_HIDE = ("/root", "/home", "/run", "/var/tmp", "/dev/shm", str(PROJECT_ROOT))
SCRATCH = "/tmp"
_uids = itertools.count()


class SandboxError(RuntimeError):
    """The sandbox itself failed (a worker could not start), as opposed to the snippet failing."""


class _Worker:
    def __init__(self, proc: subprocess.Popen, isolation: dict[str, Any]) -> None:
        self.proc = proc
        self.isolation = isolation

    def kill(self) -> None:
        """The launcher leads its own session; its death takes the init along (parent-death signal)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _read_line(fd: int, timeout_s: float) -> bytes:
    """One line from a pipe within `timeout_s`, or b'' when it ends or times out."""
    deadline = time.monotonic() + timeout_s
    buf = bytearray()
    while not buf.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return b""
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        buf += chunk
    return bytes(buf)


class WorkerPool:
    """`run(code)` executes one snippet in a fresh, fully limited process; thread-safe and loop-agnostic."""

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        size: int = 2,
        python: str = sys.executable,
        uid_base: int = 200_000,
        uid_span: int = 10_000,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.size = size
        self.python = python
        self.uid_base, self.uid_span = uid_base, uid_span
        self.start_timeout_s = start_timeout_s
        self._ready: queue.Queue[_Worker | SandboxError] = queue.Queue()
        self._executor = ThreadPoolExecutor(max_workers=max(2, size), thread_name_prefix="sandbox-pool")
        self._closed = False
        self._lock = threading.Lock()
        for _ in range(size):
            self._executor.submit(self._spawn_into_pool)

    # --- worker lifecycle ----------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        expose = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(self.python))}
        return {
            **self.limits.model_dump(exclude={"hide", "preload"}),
            "preload": list(self.limits.preload),
            "hide": [*DEFAULT_HIDE, *self.limits.hide],
            "expose": sorted(expose),
            "scratch": SCRATCH,
            "uid": self.uid_base + next(_uids) % self.uid_span,
        }

    def _spawn(self) -> _Worker:
        config = self._config()
        proc = subprocess.Popen(
            [self.python, "-I", str(WORKER_SCRIPT), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=sandbox_env(config),
            cwd="/",
            start_new_session=True,
        )
        line = _read_line(proc.stdout.fileno(), self.start_timeout_s)
        ready = json.loads(line) if line else {}
        if not ready.get("ready"):
            _Worker(proc, {}).kill()
            detail = ready.get("error") or proc.stderr.read1(4096).decode(errors="replace")
            raise SandboxError(f"sandbox worker failed to start: {detail}")
        return _Worker(proc, ready["isolation"])

    def _spawn_into_pool(self) -> None:
        try:
            worker = self._spawn()
        except Exception as exc:  # surfaced to the caller that takes this slot
            self._ready.put(exc if isinstance(exc, SandboxError) else SandboxError(str(exc)))
            return
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._ready.put(worker)

    def _take(self) -> _Worker:
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        try:
            item = self._ready.get(timeout=self.start_timeout_s)
        except queue.Empty:
            raise SandboxError("no sandbox worker became ready in time") from None
        if not self._closed:
            self._executor.submit(self._spawn_into_pool)
        if isinstance(item, SandboxError):
            raise item
        return item

    @staticmethod
    def _reap(worker: _Worker) -> None:
        try:
            worker.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.proc.wait()
        for stream in (worker.proc.stdin, worker.proc.stdout, worker.proc.stderr):
            stream.close()

    # --- calls --------------------------------------------------------------------------------
    def isolation(self) -> dict[str, Any]:
        """What the kernel granted a worker (namespaces, private filesystem, own /proc, uid drop)."""
        worker = self._take()
        self._ready.put(worker)
        return dict(worker.isolation)

    def run(self, code: str) -> SandboxResult:
        worker = self._take()
        try:
            worker.proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
            worker.proc.stdin.flush()
            line = _read_line(worker.proc.stdout.fileno(), self.limits.wall_s + 5.0)
        except BrokenPipeError:
            line = b""
        finally:
            if not self._closed:
                self._executor.submit(self._reap, worker)
        if not line:
            worker.kill()
            return SandboxResult("killed", "", "", "sandbox worker died without an answer", 0.0)
        reply = json.loads(line)
        return SandboxResult(**{k: reply[k] for k in SandboxResult.__dataclass_fields__})

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Worker):
                item.kill()
                self._reap(item)
        self._executor.shutdown(wait=True, cancel_futures=True)
