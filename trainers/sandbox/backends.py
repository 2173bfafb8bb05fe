"""Sandbox backends behind one async interface: the local warm pool, or a SandboxFusion service."""

from __future__ import annotations

import asyncio
import atexit
import threading
from abc import ABC, abstractmethod
from typing import Any

from trainers.net.policy import EGRESS_ERROR
from trainers.registry import Registry
from trainers.sandbox.limits import SandboxLimits, SandboxResult
from trainers.sandbox.pool import WorkerPool


class Sandbox(ABC):
    """Runs one Python snippet per call and never raises for what the snippet does."""

    def __init__(self, limits: SandboxLimits | dict[str, Any] | None = None) -> None:
        self.limits = limits if isinstance(limits, SandboxLimits) else SandboxLimits(**(limits or {}))

    @abstractmethod
    async def run(self, code: str) -> SandboxResult:
        """Execute `code` and report status, output and the last traceback line."""


SANDBOXES: Registry[type[Sandbox]] = Registry("sandbox backend")

_pools: dict[tuple[SandboxLimits, int], WorkerPool] = {}
_pools_lock = threading.Lock()


def shared_pool(limits: SandboxLimits, size: int) -> WorkerPool:
    """One warm pool per distinct limits, shared by every trajectory's python tool in this process."""
    with _pools_lock:
        key = (limits, size)
        if key not in _pools:
            _pools[key] = WorkerPool(limits, size=size)
        return _pools[key]


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()


@SANDBOXES.register("local")
class LocalSandbox(Sandbox):
    """Pre-started one-shot worker processes on this machine (see trainers/sandbox/worker.py)."""

    def __init__(self, limits: SandboxLimits | dict[str, Any] | None = None, *, pool_size: int = 2) -> None:
        super().__init__(limits)
        self.pool = shared_pool(self.limits, pool_size)

    async def run(self, code: str) -> SandboxResult:
        return await asyncio.to_thread(self.pool.run, code)


@SANDBOXES.register("sandboxfusion")
class SandboxFusion(Sandbox):
    """A SandboxFusion service (`POST {url}/run_code`), for teams that already run one (ToRL's choice).

    The request goes through the egress guard: a service on an internal host is reachable only once the
    operator allowlists it in WORKBENCH_EGRESS_ALLOW (a run config cannot).
    """

    def __init__(self, limits: SandboxLimits | dict[str, Any] | None = None, *, url: str) -> None:
        super().__init__(limits)
        self.url = url.rstrip("/")

    async def run(self, code: str) -> SandboxResult:
        import httpx

        from trainers.net.guard import guarded_client

        payload = {"code": code, "language": "python", "run_timeout": self.limits.wall_s}
        try:
            async with guarded_client(timeout=self.limits.wall_s + 5.0) as client:
                response = await client.post(f"{self.url}/run_code", json=payload)
        except httpx.HTTPError:  # refused by the egress policy or unreachable: one message for both
            return _service_error(EGRESS_ERROR)
        if not response.is_success:
            return _service_error(f"HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            return _service_error("the service did not answer JSON")
        return _from_fusion(body, self.limits.max_output_bytes)


def _service_error(reason: str) -> SandboxResult:
    return SandboxResult("error", "", "", f"SandboxError: {reason}", 0.0)


def _from_fusion(body: dict[str, Any], cap: int) -> SandboxResult:
    """Map SandboxFusion's run_result (Finished / TimeLimitExceeded / Error, return_code) to our statuses."""
    run = body.get("run_result") or {}
    stdout, stderr = str(run.get("stdout") or "")[:cap], str(run.get("stderr") or "")[:cap]
    elapsed = float(run.get("execution_time") or 0.0)
    if run.get("status") == "TimeLimitExceeded":
        return SandboxResult("timeout", stdout, stderr, "TimeoutError: wall time limit exceeded", elapsed)
    if body.get("status") == "Success" and run.get("return_code") == 0:
        return SandboxResult("ok", stdout, stderr, "", elapsed)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    error_line = lines[-1] if lines else str(body.get("message") or "execution failed")
    return SandboxResult("error", stdout, stderr, error_line, elapsed)


def build_sandbox(backend: str = "local", **config: Any) -> Sandbox:
    """A sandbox by registry name, e.g. build_sandbox("sandboxfusion", url=..., limits={...})."""
    return SANDBOXES.get(backend)(**config)
