"""Run model-written code with kernel-enforced limits: a warm local pool, or a SandboxFusion service."""

from trainers.sandbox.backends import SANDBOXES, LocalSandbox, Sandbox, SandboxFusion, build_sandbox
from trainers.sandbox.limits import SandboxLimits, SandboxResult
from trainers.sandbox.pool import INSECURE_ENV, SandboxError, WorkerPool, insecure_allowed, probe

__all__ = [
    "INSECURE_ENV",
    "SANDBOXES",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "SandboxFusion",
    "SandboxLimits",
    "SandboxResult",
    "WorkerPool",
    "build_sandbox",
    "insecure_allowed",
    "probe",
]
