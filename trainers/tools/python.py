"""The code interpreter (ToRL, ZeroTIR): model-written Python runs in the sandbox, never in this process."""

from __future__ import annotations

from typing import Any

from trainers.sandbox.backends import build_sandbox
from trainers.sandbox.limits import SandboxResult
from trainers.tools.base import TOOLS, Tool, ToolOutput


def observation(result: SandboxResult) -> ToolOutput:
    """Output on success; on failure the output so far and the traceback, whose last line is the error
    (so a ToRL-style "last line only" observation is the error line)."""
    text = result.stdout + result.stderr
    if result.ok:
        return ToolOutput(True, text)
    lines = [ln for ln in text.rstrip().splitlines() if ln.strip()]
    if result.error_line and (not lines or lines[-1].strip() != result.error_line):
        text = text.rstrip() + ("\n" if text.strip() else "") + result.error_line
    return ToolOutput(False, text, text.strip() or result.status)


@TOOLS.register("python")
class PythonInterpreter(Tool):
    name = "python"
    description = "Run Python code and see what it prints; the value of a final expression is printed too."
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1}},
        "required": ["code"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        *,
        timeout_s: float | None = None,
        backend: str = "local",
        limits: dict[str, Any] | None = None,
        **backend_config: Any,
    ) -> None:
        self.sandbox = build_sandbox(backend, limits=limits, **backend_config)
        # the sandbox's own wall clock fires first, so a slow snippet reports "timeout", not a tool timeout
        super().__init__(timeout_s=timeout_s if timeout_s is not None else self.sandbox.limits.wall_s + 10.0)

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        return observation(await self.sandbox.run(arguments["code"]))
