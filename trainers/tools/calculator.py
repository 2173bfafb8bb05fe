"""A calculator tool over trainers.parsing.arithmetic (no eval; work bounded by `max_bits` and `max_depth`).

A call is evaluated in a bounded child process (trainers.bounded), killed at the tool's timeout: big-integer
work within `max_bits` can still take seconds in C (3**20000000 with the bits lifted), which no timeout in
the calling process could interrupt, and the calling process is a rollout worker serving other runs.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from trainers.bounded import BoundedCallError, BoundedRunner, BoundsExceeded, Limits
from trainers.tools.base import TOOLS, Tool, ToolOutput

CALC_MEMORY_MB = 1024  # of a child's address space: the interpreter, and a value of max_bits
CALC_OUTPUT_BYTES = 1 << 16  # a printed value (Python prints at most 4300 digits of an int)
CALCULATE_IN_WORKER = "trainers.parsing.arithmetic:calculate_text"


def call_limits(timeout_s: float) -> Limits:
    """One call's bounds: the tool's timeout as the deadline and (rounded up) as CPU seconds."""
    return Limits(
        cpu_s=max(1, math.ceil(timeout_s)), wall_s=timeout_s, memory_mb=CALC_MEMORY_MB,
        output_bytes=CALC_OUTPUT_BYTES,
    )  # fmt: skip


# the children every calculator of this process shares; each call passes its own tool's limits
CALCULATOR = BoundedRunner(call_limits(2.0), preload=("trainers.parsing.arithmetic",), workers=4)


@TOOLS.register("calculator")
class Calculator(Tool):
    name = "calculator"
    description = "Evaluate an arithmetic expression with + - * / // % ** and parentheses."
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (3 + 4.5) * -2 ** 3"}},
        "required": ["expression"],
        "additionalProperties": False,
    }
    default_timeout_s = 2.0
    startup_s = 10.0  # a child replaced after a timeout starts outside the call's own deadline

    def __init__(self, *, timeout_s: float | None = None, max_bits: int = 4096, max_depth: int = 64) -> None:
        super().__init__(timeout_s=timeout_s)
        self.max_bits, self.max_depth = max_bits, max_depth

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        expression = arguments["expression"]
        try:
            reply = await asyncio.to_thread(
                CALCULATOR.call, CALCULATE_IN_WORKER, expression, self.max_bits, self.max_depth,
                limits=call_limits(self.timeout_s),
            )  # fmt: skip
        except BoundsExceeded as exc:
            if exc.kind == "time":
                return ToolOutput(False, "", f"{self.name} timed out after {self.timeout_s:g}s")
            return ToolOutput(False, "", f"calculator error: the calculation {exc}")
        except BoundedCallError as exc:
            return ToolOutput(False, "", f"calculator error: {exc}")
        if "error" in reply:
            return ToolOutput(False, "", f"calculator error: {reply['error']}")
        return ToolOutput(True, reply["value"])
