"""A scripted generation backend and test tools for engine tests that need exact, known responses.

The scripted backend is a real `GenerationBackend`: it tokenizes the text a test scripts for the
current context and applies the request's stop strings and token limit like a model would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest
from trainers.tools.base import TOOLS, Tool, ToolOutput


class ScriptedBackend(GenerationBackend):
    """`respond(prompt_text) -> text` decides the next assistant text; `delay_s` per batch mimics compute."""

    def __init__(self, tokenizer: Any, respond: Callable[[str], str], delay_s: float = 0.0) -> None:
        self.tokenizer = tokenizer
        self.respond = respond
        self.delay_s = delay_s
        self.batch_sizes: list[int] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        self.batch_sizes.append(len(requests))
        if self.delay_s:
            time.sleep(self.delay_s)
        return [self._one(r) for r in requests]

    def _one(self, request: GenerationRequest) -> GenerationOutput:
        prompt = self.tokenizer.decode(request.prompt_ids, skip_special_tokens=False)
        text = self.respond(prompt)
        cuts = [(text.find(s) + len(s), s) for s in request.stop_strings if s in text]
        stop = min(cuts)[1] if cuts else None
        if stop is not None:
            text = text[: min(cuts)[0]]
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) > request.max_new_tokens:
            ids = ids[: request.max_new_tokens]
            return GenerationOutput(ids, [0.0] * len(ids), "length")
        if stop is not None:
            return GenerationOutput(ids, [0.0] * len(ids), "stop", stop)
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            return GenerationOutput(ids, [0.0] * len(ids), "eos")
        return GenerationOutput(ids, [0.0] * len(ids), "length")


class SleepTool(Tool):
    """Sleeps `seconds` (default 0.1) and echoes `text`; the text "fail" returns a traceback.

    `max_in_flight` is the most calls that were sleeping at once since the last `reset()` (each test):
    how a test observes that calls overlapped, without timing them."""

    name = "test_sleep"
    description = "wait, then echo the text"
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}},
        "required": ["text"],
    }
    _lock = threading.Lock()
    in_flight = max_in_flight = 0

    @classmethod
    def reset(cls) -> None:
        cls.in_flight = cls.max_in_flight = 0

    @classmethod
    def _enter(cls, step: int) -> None:
        with cls._lock:
            cls.in_flight += step
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        self._enter(1)
        try:
            await asyncio.sleep(arguments.get("seconds", 0.1))
        finally:
            self._enter(-1)
        if arguments["text"] == "fail":
            return ToolOutput(
                False, "", "Traceback (most recent call last):\n  File x\nValueError: bad input"
            )
        return ToolOutput(True, f"echo {arguments['text']}")


class CodeTool(Tool):
    """Stands in for a code interpreter: reports the code it was given, instantly."""

    name = "test_code"
    description = "run code"
    parameters = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(True, f"ran {arguments['code'].strip()}")


def register_test_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered only while a test of this folder runs, so tool lists elsewhere never show them."""
    for tool in (SleepTool, CodeTool):
        monkeypatch.setitem(TOOLS._items, tool.name, tool)


@pytest.fixture(autouse=True)
def test_tools(monkeypatch):
    register_test_tools(monkeypatch)
    SleepTool.reset()


@pytest.fixture(scope="module")
def module_test_tools():
    """The same registration for module-scoped fixtures that roll out once for several tests."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        register_test_tools(monkeypatch)
        yield


@pytest.fixture
def scripted(tiny_tokenizer):
    """Factory: scripted(respond, delay_s=0.0) -> ScriptedBackend over the tiny tokenizer."""
    return lambda respond, delay_s=0.0: ScriptedBackend(tiny_tokenizer, respond, delay_s)
