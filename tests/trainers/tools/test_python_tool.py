"""The code interpreter tool: sandbox results become observations (ToRL: the error's last line last)."""

from __future__ import annotations

import asyncio

from trainers.sandbox import SandboxResult
from trainers.tools.python import PythonInterpreter, observation


def test_output_of_a_successful_run() -> None:
    result = asyncio.run(PythonInterpreter().invoke({"code": "print(sum(range(10)))"}))
    assert (result.ok, result.output) == (True, "45\n")


def test_error_observation_ends_with_the_error_line() -> None:
    result = asyncio.run(PythonInterpreter().invoke({"code": "print('partial')\n[][1]"}))
    assert not result.ok
    assert result.output.startswith("partial\nTraceback")
    assert result.output.splitlines()[-1] == "IndexError: list index out of range"


def test_timeout_observation_names_the_limit() -> None:
    out = observation(SandboxResult("timeout", "tick\n", "", "TimeoutError: wall time limit exceeded", 2.0))
    assert (out.ok, out.error) == (False, "tick\nTimeoutError: wall time limit exceeded")


def test_tool_timeout_leaves_room_for_the_sandbox_limit() -> None:
    tool = PythonInterpreter(limits={"wall_s": 3})
    assert tool.timeout_s == 13.0


def test_missing_code_is_rejected() -> None:
    result = asyncio.run(PythonInterpreter().invoke({}))
    assert result.error == "invalid arguments for python: 'code' is a required property"
