"""The tool protocol: a name, a description, a JSON Schema of the arguments and an async call."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import jsonschema

from trainers.registry import Registry
from trainers.trajectory import ToolResult


@dataclass
class ToolOutput:
    """What a tool implementation returns: observation text, or an error message."""

    ok: bool
    output: str
    error: str | None = None


class hybridmethod:
    """Like classmethod, but binds to the instance when called on one, so a tool configured per
    instance (the http tool's name and schema) reports its own spec while `Cls.spec()` still works."""

    def __init__(self, func: Any) -> None:
        self.func = func

    def __get__(self, obj: Any, cls: type) -> Any:
        return self.func.__get__(cls if obj is None else obj)


class Tool(ABC):
    """Subclass, set the class attributes, implement `run`, and register with `@TOOLS.register`.

    Instances are made per trajectory from keyword config (timeouts, URLs, corpus paths), so a
    stateful tool or environment keeps its state for exactly one trajectory.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    default_timeout_s: ClassVar[float] = 10.0
    # seconds `invoke` waits on top of timeout_s: for a tool that holds its calls to timeout_s itself and
    # needs a moment first (the calculator starts a child process after one was killed)
    startup_s: ClassVar[float] = 0.0

    def __init__(self, *, timeout_s: float | None = None, **config: Any) -> None:
        self.timeout_s = timeout_s if timeout_s is not None else self.default_timeout_s
        self.config = config

    @abstractmethod
    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        """Execute the call with already-validated arguments."""

    @hybridmethod
    def spec(cls) -> dict[str, Any]:
        """The OpenAI-style function spec shown to the model."""
        return {
            "type": "function",
            "function": {"name": cls.name, "description": cls.description, "parameters": cls.parameters},
        }

    @hybridmethod
    def validation_error(cls, arguments: Any) -> str | None:
        """The JSON Schema validator's message for bad arguments, or None when they are valid."""
        exc = jsonschema.exceptions.best_match(_validator(json.dumps(cls.parameters)).iter_errors(arguments))
        if exc is None:
            return None
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"invalid arguments for {cls.name}{' at ' + where if where else ''}: {exc.message}"

    async def start(self) -> None:
        """Do what needs the event loop before the first call (an environment server's reset); once."""
        return None

    async def close(self) -> None:
        """Release what the tool holds (clients, environments); called once when its trajectory ends."""
        return None

    async def invoke(self, arguments: Any) -> ToolResult:
        """Validate, run with the timeout, time it; never raises."""
        start = time.perf_counter()
        error = self.validation_error(arguments)
        if error is None:
            try:
                out = await asyncio.wait_for(self.run(arguments), timeout=self.timeout_s + self.startup_s)
            except TimeoutError:
                out = ToolOutput(False, "", f"{self.name} timed out after {self.timeout_s:g}s")
            except Exception as exc:  # a tool bug becomes an observation, not a crashed rollout
                out = ToolOutput(False, "", f"{type(exc).__name__}: {exc}")
        else:
            out = ToolOutput(False, "", error)
        latency = time.perf_counter() - start
        observation = out.output if out.ok else (out.error or "error")
        return ToolResult(self.name, out.ok, observation, out.error, latency)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A checked validator per schema, built once: `jsonschema.validate` re-checks the schema every call,
    which cost more than most tool calls in a 64-trajectory rollout."""
    schema = json.loads(schema_json)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


TOOLS: Registry[type[Tool]] = Registry("tool")
