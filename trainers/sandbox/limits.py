"""What a sandboxed call may use, and what it returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "error", "timeout", "killed"]


class SandboxLimits(BaseModel):
    """Per-call limits; every one is enforced by the kernel (rlimits, namespaces), not by trust."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(10.0, gt=0, description="wall-clock limit; the launcher kills the call after it")
    cpu_s: int = Field(10, ge=1, description="RLIMIT_CPU seconds")
    memory_mb: int = Field(1024, ge=64, description="RLIMIT_AS per process")
    max_processes: int = Field(32, ge=1, description="RLIMIT_NPROC for the sandbox's own uid")
    max_file_mb: int = Field(16, ge=1, description="RLIMIT_FSIZE")
    max_open_files: int = Field(256, ge=16, description="RLIMIT_NOFILE")
    max_output_bytes: int = Field(65536, ge=1024, description="stdout and stderr are each cut after this")
    scratch_mb: int = Field(64, ge=1, description="size of the tmpfs scratch directory")
    network: bool = Field(False, description="True keeps the host network (no new network namespace)")
    preload: tuple[str, ...] = Field((), description="modules the warm worker imports before the call")
    hide: tuple[str, ...] = Field((), description="extra host paths to cover with an empty read-only tmpfs")
    endpoint_dir: str | None = Field(
        None,
        description="a host directory of Unix sockets shown read-only at /endpoint: the snippet may connect"
        " to the sockets in it (an agent program's session endpoint) and to nothing else",
    )


@dataclass
class SandboxResult:
    """The outcome of one call; `error_line` is the last traceback line (ToRL's error observation)."""

    status: Status
    stdout: str
    stderr: str
    error_line: str
    elapsed_s: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
