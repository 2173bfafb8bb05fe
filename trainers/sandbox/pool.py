"""A warm pool of one-shot sandbox workers: a call costs one pipe round trip, not an interpreter start.

A zygote (trainers/sandbox/worker.py) forks each worker with every limit applied and passes the pool
the worker's pipes. A worker serves exactly one call and is discarded; a background thread keeps
`size` of them ready, so nothing leaks from one call into the next.

Isolation fails closed: as root the workers use namespaces and a per-call uid ("root"), as any other
user unprivileged user namespaces ("userns"). When neither can be set up the pool refuses to start
(SandboxError says what is missing) unless the operator set WORKBENCH_SANDBOX_INSECURE=1, which lets
it run code without isolation ("none") and logs a warning.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from trainers.sandbox.limits import SandboxLimits, SandboxResult
from trainers.sandbox.output import Capture, LineReader, classify
from trainers.sandbox.worker import sandbox_env

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What the sandbox's root filesystem shows (read-only), besides the interpreter's own prefixes.
SYSTEM_EXPOSE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Paths the snippet must not see even where they lie inside an exposed one (the project, homes).
DEFAULT_HIDE = ("/root", "/home", "/run", "/var/tmp", "/dev/shm", str(PROJECT_ROOT))
SCRATCH = "/tmp"
# The operator's explicit permission to run model code without isolation where it cannot be set up.
INSECURE_ENV = "WORKBENCH_SANDBOX_INSECURE"
_uids = itertools.count()
logger = logging.getLogger(__name__)


def insecure_allowed() -> bool:
    """True when the environment sets WORKBENCH_SANDBOX_INSECURE to a true value (1, true, yes)."""
    return os.environ.get(INSECURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class SandboxError(RuntimeError):
    """The sandbox itself failed (a worker could not start), as opposed to the snippet failing."""


class _Worker:
    """The pool's ends of one worker's pipes, and a pidfd on its init (safe against pid reuse)."""

    def __init__(self, fds: dict[str, int]) -> None:
        self.fds = fds
        self.ctl = LineReader(fds["ctl"])
        self.pidfd = -1
        self.isolation: dict[str, Any] = {}

    def kill(self) -> None:
        if self.pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self) -> None:
        for fd in (*self.fds.values(), self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pidfd = -1


class WorkerPool:
    """`run(code)` executes one snippet in a fresh, fully limited process; thread-safe and loop-agnostic.

    `mode` is the isolation every worker of this pool gets ("root", "userns" or "none"); `report` is
    what the zygote's self-test found (the isolation, and why a stronger mode was refused)."""

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
        self.size, self.start_timeout_s = size, start_timeout_s
        self.uid_base, self.uid_span = uid_base, uid_span
        self.mode = "root" if os.geteuid() == 0 else "userns"  # what the zygote's hello confirms
        self.report: dict[str, Any] = {}
        self._ready: queue.Queue[_Worker | SandboxError] = queue.Queue()
        self._wanted: queue.Queue[bool] = queue.Queue()
        self._closed = False
        self._broken: SandboxError | None = None
        self._started = threading.Event()
        self._sock: socket.socket | None = None
        self._zygote: subprocess.Popen | None = None
        # The zygote dies with the thread that started it (PR_SET_PDEATHSIG), so the pool's own
        # long-lived thread starts it, not whichever short-lived thread built the pool.
        threading.Thread(target=self._refill, args=(python,), name="sandbox-pool", daemon=True).start()
        if not self._started.wait(self.start_timeout_s + 5.0):
            self._broken = SandboxError("the sandbox zygote did not answer in time")
        if self.report.get("ok") is False:
            self.close()
            raise SandboxError(
                f"the sandbox refuses to start: {self.report['error']}. Model code runs only isolated: "
                "allow user namespaces or run as root (docs/security.md), or set "
                f"{INSECURE_ENV}=1 to run it without isolation"
            )
        if self.mode == "none":
            logger.warning(
                "%s is set and sandbox isolation failed (%s): model code runs WITHOUT isolation",
                INSECURE_ENV,
                self.report.get("refused"),
            )
        for _ in range(size):
            self._wanted.put(True)

    # --- workers ------------------------------------------------------------------------------
    def _start_zygote(self, python: str, mode: str) -> None:
        """Start a zygote for `mode` and read its hello: the isolation its self-test got, or why it failed."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        expose = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(python)), *SYSTEM_EXPOSE}
        config = {
            **self.limits.model_dump(exclude={"hide", "preload"}),
            "preload": list(self.limits.preload),
            "hide": [*DEFAULT_HIDE, *self.limits.hide],
            "expose": sorted(expose),
            "scratch": SCRATCH,
            "mode": mode,
            "owner_pid": os.getpid(),
            "uid_base": self.uid_base,
            "start_timeout_s": self.start_timeout_s,
        }
        self._sock = ours
        try:
            self._zygote = subprocess.Popen(
                [python, "-I", str(WORKER_SCRIPT), json.dumps(config), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=sandbox_env(config),
                cwd="/",
                start_new_session=True,
            )
        finally:
            theirs.close()
        ours.settimeout(self.start_timeout_s)
        try:
            hello = ours.recv(65536)
        except TimeoutError:
            raise SandboxError("the sandbox zygote did not answer in time") from None
        finally:
            ours.settimeout(None)
        if not hello:
            raise SandboxError("the sandbox zygote exited before it was ready; is the python path right?")
        self.report = json.loads(hello)
        self.mode = self.report["mode"]

    def _spawn(self) -> _Worker:
        """Ask the zygote for a worker; its start-up runs on while the next one is forked."""
        self._sock.send(json.dumps({"uid": self.uid_base + next(_uids) % self.uid_span}).encode())
        message, fds, _, _ = socket.recv_fds(self._sock, 1024, 4)
        if not message:
            raise SandboxError("the sandbox zygote exited; is the python path right?")
        return _Worker(dict(zip(json.loads(message), fds, strict=True)))

    def _await_ready(self, worker: _Worker) -> None:
        """Read the launcher's pid line and the init's ready line (in either order)."""
        deadline = time.monotonic() + self.start_timeout_s
        while worker.pidfd < 0 or not worker.isolation:
            line = worker.ctl.read_line(deadline)
            info = json.loads(line) if line else {"ready": False, "error": "no answer from the worker"}
            if "pid" in info:
                try:
                    worker.pidfd = os.pidfd_open(info["pid"])
                except ProcessLookupError:  # the init died during set-up; its error line follows
                    continue
            elif info.get("ready"):
                worker.isolation = info["isolation"]
            else:
                worker.kill()
                worker.close()
                raise SandboxError(f"sandbox worker failed to start: {info.get('error')}")

    def _refill(self, python: str) -> None:
        """One thread starts the zygote, then workers as calls use them (the zygote forks: milliseconds)."""
        try:
            self._start_zygote(python, self.mode)
            if self.report.get("ok") is False and insecure_allowed():  # the operator's explicit choice
                refused = self.report["error"]
                self._stop_zygote()
                self._start_zygote(python, "none")
                self.report["refused"] = refused
        except (OSError, SandboxError) as exc:
            self._broken = exc if isinstance(exc, SandboxError) else SandboxError(repr(exc))
        finally:
            self._started.set()
        if self._broken is not None or not self.report.get("ok"):
            return
        while self._wanted.get() and not self._closed:
            try:
                self._ready.put(self._spawn())
            except (OSError, ValueError, SandboxError) as exc:
                error = exc if isinstance(exc, SandboxError) else SandboxError(repr(exc))
                if self._zygote.poll() is not None:
                    self._broken = error  # no more workers will come: fail calls at once, not after a wait
                self._ready.put(error)
                if self._broken:
                    return

    def _take(self) -> _Worker:
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        if self._broken is not None and self._ready.empty():
            raise self._broken
        try:
            item = self._ready.get(timeout=self.start_timeout_s)
        except queue.Empty:
            raise SandboxError("no sandbox worker became ready in time") from None
        if isinstance(item, SandboxError):
            self._wanted.put(True)
            raise item
        try:
            self._await_ready(item)
        except SandboxError:
            self._wanted.put(True)
            raise
        return item

    def isolation(self) -> dict[str, Any]:
        """What a worker got: mode, namespaces, new root, own /proc, uid or capability drop, seccomp."""
        worker = self._take()
        self._ready.put(worker)
        return dict(worker.isolation)

    # --- one call -----------------------------------------------------------------------------
    def run(self, code: str) -> SandboxResult:
        worker = self._take()
        self._wanted.put(True)  # a replacement starts while this call runs
        try:
            return self._run(worker, code)
        finally:
            worker.kill()
            worker.close()

    def _run(self, worker: _Worker, code: str) -> SandboxResult:
        start = time.perf_counter()
        with contextlib.suppress(BrokenPipeError):
            data = memoryview(code.encode("utf-8", "replace"))
            while data:
                data = data[os.write(worker.fds["code"], data) :]
        os.close(worker.fds.pop("code"))
        out, err = Capture(self.limits.max_output_bytes), Capture(self.limits.max_output_bytes)
        reports: dict[str, dict] = {}
        captures = {worker.fds["out"]: out, worker.fds["err"]: err}
        timed_out = self._wait(worker, captures, reports, start)
        elapsed = time.perf_counter() - start
        for fd, capture in captures.items():
            capture.drain(fd)
        deadline = time.monotonic() + 5.0
        while "exit" not in reports and "status" not in reports:  # the snippet died: why?
            line = worker.ctl.read_line(deadline)
            if not line:
                break
            _record(reports, line)
        status, error_line = classify(reports, timed_out, self.limits.cpu_s)
        return SandboxResult(
            status, out.text(), err.text(), error_line, round(elapsed, 6), out.cut or err.cut
        )

    def _wait(self, worker: _Worker, captures: dict[int, Capture], reports: dict, start: float) -> bool:
        """Capture output until the init exits (then its whole namespace is gone) or the wall clock ends.

        When the snippet reports its result (its output is flushed by then) the init is killed at once.
        If the snippet also saw no other process in its namespace, the call ends there: SIGKILL to a
        pid-namespace init takes everything in it down and cannot be undone, so waiting for the kernel
        to finish would only add a scheduler round trip (milliseconds on a loaded machine)."""
        deadline, timed_out = start + self.limits.wall_s, False
        ctl = worker.fds["ctl"]
        with selectors.DefaultSelector() as sel:
            for fd in (*captures, ctl, worker.pidfd):
                sel.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0 and not timed_out:
                    worker.kill()
                    timed_out = True
                events = sel.select(1.0 if timed_out else remaining)
                if any(key.fd == worker.pidfd for key, _ in events):
                    break
                for key, _ in events:
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                    elif key.fd == ctl:
                        for line in worker.ctl.feed(chunk):
                            _record(reports, line)
                        if "status" in reports:
                            worker.kill()  # the snippet is done: end its namespace now
                            if reports["status"].get("alone") is True:
                                return False  # nothing else ran there; the kill is already irrevocable
                    else:
                        captures[key.fd].feed(chunk)
        return timed_out and "status" not in reports

    def close(self) -> None:
        self._closed = True
        self._wanted.put(False)
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Worker):
                item.kill()
                item.close()
        self._stop_zygote()

    def _stop_zygote(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the zygote sees the end of its socket and exits
        if self._zygote is None:
            return
        try:
            self._zygote.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._zygote.kill()
            self._zygote.wait()


def probe(timeout_s: float = 30.0) -> dict[str, Any]:
    """The isolation a pool started by this process gets, without running a call (for status pages):
    {"mode": "root" | "userns" | "none" | "refused" | "broken", "isolation": {...}, "error": str,
    "insecure_allowed": bool}; "refused" means pools fail closed here (error says why)."""
    report: dict[str, Any] = {"insecure_allowed": insecure_allowed()}
    try:
        pool = WorkerPool(size=0, start_timeout_s=timeout_s)
    except SandboxError as exc:
        return {**report, "mode": "refused", "error": str(exc)}
    try:
        if pool._broken is not None:
            return {**report, "mode": "broken", "error": str(pool._broken)}
        report.update(mode=pool.mode, isolation=pool.report.get("isolation", {}))
        if pool.report.get("refused"):
            report["error"] = pool.report["refused"]
        return report
    finally:
        pool.close()


def _record(reports: dict[str, dict], line: bytes) -> None:
    """Keep the snippet's first result line and the init's exit line; ignore anything else."""
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        info = json.loads(line)
        key = "exit" if "exit" in info else "status" if "status" in info else None
        if key is not None:
            reports.setdefault(key, info)
