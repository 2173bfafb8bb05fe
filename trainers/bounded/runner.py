"""The caller side of trainers.bounded: a few persistent workers, each call under a deadline and caps.

A worker starts on first use and serves call after call (one pipe round trip each). A call that runs
past its wall-clock deadline, or sends more than `output_bytes`, gets its worker killed; the next call
starts a fresh one. RLIMIT_CPU (SIGXCPU) and RLIMIT_AS (MemoryError) end the call inside the worker.
The waiting caller sleeps in poll(), so other threads of the process (a web server's) keep running.
A worker that loses its caller exits at the end of its stdin, or at its CPU limit when busy.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.bounded.protocol import decode, encode

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 120.0  # a cold worker imports sympy or Jinja; generous for a loaded machine
READY_BYTES = 4096
PROTOCOL_SLACK = 1024  # the reply's envelope around a result of `output_bytes`


@dataclass(frozen=True)
class Limits:
    """Bounds of one call: CPU seconds, wall-clock seconds, the reply's bytes; the worker's address space."""

    cpu_s: int = 5
    wall_s: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 1 << 20


class BoundsExceeded(RuntimeError):
    """The call passed a bound (`kind` "time", "memory" or "output") or its worker died ("crash")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class BoundedCallError(RuntimeError):
    """The function raised in the worker; `type_name` is the exception's class name."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def _death(code: int, limits: Limits) -> BoundsExceeded:
    if code == -signal.SIGXCPU:
        return BoundsExceeded("time", f"exceeded {limits.cpu_s} s of CPU time")
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    return BoundsExceeded("crash", f"worker died ({how})")


class _Worker:
    """One child process and its pipes; one caller at a time (the runner's queue sees to it)."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self._preload = preload
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()

    def call(self, fn: str, args: tuple[Any, ...], limits: Limits) -> Any:
        proc = self._running(limits)
        request = {"fn": fn, "args": list(args), "cpu_s": limits.cpu_s, "output_bytes": limits.output_bytes}
        try:
            assert proc.stdin is not None
            proc.stdin.write(encode(request))
            proc.stdin.flush()
        except OSError:  # it died since its last call
            raise self._reap(limits) from None
        deadline = time.monotonic() + limits.wall_s
        reply = self._read(
            deadline, limits.output_bytes + PROTOCOL_SLACK, limits, f"the {limits.wall_s:g} s deadline"
        )
        if "ok" in reply:
            return reply["ok"]
        if "raised" in reply:
            raise BoundedCallError(reply["raised"], reply["message"])
        if reply.get("exceeded") == "output":
            raise BoundsExceeded("output", f"output of {reply['bytes']} bytes exceeded {limits.output_bytes}")
        self._reap(limits)
        raise BoundsExceeded("memory", f"exceeded {limits.memory_mb} MiB of memory")

    def _running(self, limits: Limits) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._discard()
        spec = json.dumps({"memory_mb": limits.memory_mb, "preload": list(self._preload)})
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "trainers.bounded.child", spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=PROJECT_ROOT,
            env={"PATH": os.defpath, "LANG": "C.UTF-8"},
        )
        self._read(time.monotonic() + STARTUP_S, READY_BYTES, limits, f"{STARTUP_S:g} s to start")
        return self._proc

    def _read(self, deadline: float, cap: int, limits: Limits, deadline_text: str) -> dict[str, Any]:
        """The next reply line, waiting until `deadline`; kills the worker past it or past `cap` bytes."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > cap:
                self.kill()
                raise BoundsExceeded("output", f"output exceeded {limits.output_bytes} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise BoundsExceeded("time", f"exceeded {deadline_text}")
            if poller.poll(remaining * 1000):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._reap(limits)
                self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return decode(line)

    def _reap(self, limits: Limits) -> BoundsExceeded:
        """Why the worker ended (it closed its end); the worker is discarded."""
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -signal.SIGKILL
        self._discard()
        return _death(code, limits)

    def kill(self) -> None:
        """Kill the process now and discard it (from its caller's thread)."""
        if self._proc is not None:
            self.signal_kill()
            self._proc.wait()
        self._discard()

    def signal_kill(self) -> None:
        """Send SIGKILL only: safe from another thread; the caller then sees the worker die."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    def forget(self) -> None:
        """In a forked copy of the process: drop the parent's worker without touching it."""
        self._discard()

    def _discard(self) -> None:
        if self._proc is not None:
            for stream in (self._proc.stdin, self._proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()  # type: ignore[union-attr]
        self._proc = None
        self._buffer.clear()


class BoundedRunner:
    """`call(fn, *args)` runs `fn` (a "trainers.module:name" reference) in one of `workers` bounded children.

    Thread-safe; `limits` may be replaced between calls (the memory limit applies to new workers).
    """

    def __init__(self, limits: Limits, *, preload: tuple[str, ...] = (), workers: int = 2) -> None:
        self.limits = limits
        self._workers = [_Worker(preload) for _ in range(workers)]
        self._reset()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_in_child(ref))

    def _reset(self) -> None:
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()  # the warmest worker first
        for worker in self._workers:
            self._idle.put(worker)
        self._lock = threading.Lock()
        self._busy = 0

    @property
    def in_flight(self) -> int:
        """Calls running now."""
        return self._busy

    def call(self, fn: str, *args: Any, limits: Limits | None = None) -> Any:
        """`fn(*args)`'s JSON result; BoundsExceeded past a bound, BoundedCallError if `fn` raised. `limits`
        replaces the runner's for this call (its memory limit applies only to a worker it starts)."""
        limits = limits or self.limits
        try:
            worker = self._idle.get(timeout=limits.wall_s)
        except queue.Empty:
            raise BoundsExceeded("time", f"every worker stayed busy for {limits.wall_s:g} s") from None
        with self._lock:
            self._busy += 1
        try:
            return worker.call(fn, args, limits)
        finally:
            with self._lock:
                self._busy -= 1
            self._idle.put(worker)

    def close(self) -> None:
        """Kill every started worker: calls in flight end with BoundsExceeded("crash"), later calls start
        afresh (a worker still starting at this moment is not affected)."""
        for worker in self._workers:
            worker.signal_kill()

    def _after_fork(self) -> None:
        for worker in self._workers:
            worker.forget()
        self._reset()


def _forget_in_child(ref: weakref.ReferenceType[BoundedRunner]) -> None:
    runner = ref()
    if runner is not None:
        runner._after_fork()
