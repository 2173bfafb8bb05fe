"""The `rollout.agent` section: which agent program plays the episodes, and its sandbox limits."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

ENTRY_POINT = "run"
# the templates whose conversations the agent endpoint renders (ChatML turns with <tool_call> blocks)
AGENT_TEMPLATES = ("qwen_tool", "hf_native")
MAX_PROGRAM_CHARS = 200_000  # an agent program is code a team writes, not data: bounds what a check parses


class ProgramError(ValueError):
    """The program cannot run: a syntax error, or no `run(task, client)`."""


def check_program(source: str, filename: str) -> None:
    """Raise ProgramError unless `source` parses and defines `run` with two parameters at the top level."""
    if len(source) > MAX_PROGRAM_CHARS:
        raise ProgramError(
            f"{filename}: {len(source)} characters; an agent program has at most {MAX_PROGRAM_CHARS}"
        )
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise ProgramError(f"{filename}: line {exc.lineno}: {exc.msg}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT:
            if len(node.args.args) + len(node.args.posonlyargs) >= 2 or node.args.vararg:
                return
            raise ProgramError(f"{filename}: {ENTRY_POINT}() must take (task, client)")
    raise ProgramError(f"{filename}: no top-level function {ENTRY_POINT}(task, client)")


class AgentConfig(BaseModel):
    """An agent program (a file, or its text) and what each of its episodes may use."""

    model_config = ConfigDict(extra="forbid")

    program: str | None = Field(None, description="path of a Python file defining run(task, client)")
    source: str | None = Field(
        None, description="the program's text instead of a path (the workbench's form)"
    )
    wall_s: float = Field(120.0, gt=0, le=3600, description="an episode's wall-clock limit in the sandbox")
    memory_mb: int = Field(1024, ge=256, le=16384, description="the program's memory limit (RLIMIT_AS)")
    concurrency: int = Field(8, ge=1, le=256, description="episodes whose programs run at once")
    max_context_tokens: int = Field(
        8192, ge=64, le=1_048_576, description="a request's conversation plus its new tokens, at most"
    )

    @model_validator(mode="after")
    def _one_program(self) -> AgentConfig:
        if (self.program is None) == (self.source is None):
            raise ValueError("rollout.agent needs exactly one of program (a path) or source (its text)")
        if self.source is not None:  # a syntax error or a missing run() fails here, before the run starts
            check_program(self.source, "agent_program.py")
        return self  # a program file is read (and checked) only where the run is built, never here

    def read(self) -> tuple[str, str]:
        """The program's source and the file name its tracebacks show."""
        if self.source is not None:
            return self.source, "agent_program.py"
        path = Path(self.program)
        try:
            return path.read_text(encoding="utf-8"), path.name
        except OSError as exc:
            raise ProgramError(f"rollout.agent.program: cannot read {path}: {exc.strerror}") from None
