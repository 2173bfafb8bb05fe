"""Reading a worker's pipes: capped output, control lines, and what the result status is."""

from __future__ import annotations

import os
import select
import signal
import time

from trainers.sandbox.limits import Status


class Capture:
    """Keeps the first `cap` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.total = cap, bytearray(), 0

    @property
    def cut(self) -> bool:
        return self.total > self.cap

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def drain(self, fd: int) -> None:
        """Read what is left without blocking (a leftover child could hold the pipe without namespaces)."""
        os.set_blocking(fd, False)
        try:
            while chunk := os.read(fd, 65536):
                self.feed(chunk)
        except BlockingIOError:
            pass

    def text(self) -> str:
        out = self.data.decode("utf-8", "replace")
        if self.cut:
            out += f"\n[output truncated: {self.total - self.cap} more bytes]"
        return out


class LineReader:
    """Newline-delimited JSON messages from a pipe, buffered across reads."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add what was read elsewhere; return the lines it completed."""
        self.buffer += chunk
        *lines, rest = bytes(self.buffer).split(b"\n")
        self.buffer = bytearray(rest)
        return lines

    def read_line(self, deadline: float) -> bytes:
        """The next line, or b'' when the pipe ends or `deadline` (time.monotonic) passes."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                return b""
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line


def classify(reports: dict[str, dict], timed_out: bool, cpu_s: float) -> tuple[Status, str]:
    """Status and error line from the init's own report, the launcher's wait status and the clocks."""
    reported = reports.get("status", {})
    status, error_line = reported.get("status"), str(reported.get("error_line", ""))
    if timed_out:
        return "timeout", "TimeoutError: wall time limit exceeded"
    if status in ("ok", "error"):
        return status, error_line
    exit_info = reports.get("exit", {})
    wait_status = int(exit_info.get("exit", 0))
    sig = os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else 0
    # SIGXCPU is the soft limit itself; SIGKILL past the soft limit is the hard one (soft + 1 s)
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and float(exit_info.get("cpu_s", 0)) >= cpu_s):
        return "timeout", "TimeoutError: CPU time limit exceeded"
    if sig:
        return "killed", f"killed by signal {signal.Signals(sig).name}"
    if "exit" not in exit_info:
        return "killed", "the sandbox process ended without a result"
    code = os.WEXITSTATUS(wait_status)  # the snippet called os._exit itself
    return ("ok", "") if code == 0 else ("error", f"SystemExit: {code}")
