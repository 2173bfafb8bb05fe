"""A backend that samples ids no tokenizer would produce for its text, and agent programs for tests.

`NonCanonicalBackend` returns each character's ids on their own, so decoding and re-encoding its text
gives other ids: a trajectory that holds its ids exactly was never retokenized."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainers.agent.program import AgentProgram
from trainers.agent.rollouts import AgentRollouts
from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest
from trainers.config.agent import AgentConfig
from trainers.config.limits import RolloutLimits

PROGRAMS = Path(__file__).with_name("programs")


class NonCanonicalBackend(GenerationBackend):
    """`respond(prompt_text) -> text`; the ids are the text's characters encoded one by one, with
    log-probs numbered by call, and every request and output is kept."""

    def __init__(self, tokenizer: Any, respond: Callable[[str], str]) -> None:
        self.tokenizer, self.respond = tokenizer, respond
        self.requests: list[GenerationRequest] = []
        self.outputs: list[GenerationOutput] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        return [self._one(r) for r in requests]

    def _one(self, request: GenerationRequest) -> GenerationOutput:
        text = self.respond(self.tokenizer.decode(request.prompt_ids, skip_special_tokens=False))
        stop = next((s for s in request.stop_strings if s in text), None)
        if stop is not None:
            text = text[: text.index(stop) + len(stop)]
        ids = [i for ch in text for i in self.tokenizer.encode(ch, add_special_tokens=False)]
        ids = ids[: request.max_new_tokens]
        n = len(self.outputs)
        out = GenerationOutput(ids, [-(n + 1) / 100] * len(ids), "stop" if stop else "length", stop)
        self.requests.append(request)
        self.outputs.append(out)
        return out


def calls_then_answer(calls: int) -> Callable[[str], str]:
    """A policy that calls the calculator `calls` times (counting responses so far), then answers."""

    def respond(prompt: str) -> str:
        n = prompt.count("<tool_response>")
        if n < calls:
            call = json.dumps({"name": "calculator", "arguments": {"expression": f"{n}+1"}})
            return f"<think>step {n}</think>\n<tool_call>\n{call}\n</tool_call><|im_end|>"
        return "<think>done</think> \\boxed{4}<|im_end|>"

    return respond


@pytest.fixture(scope="module")
def agent_rollouts(tiny_tokenizer):
    """Factory: agent_rollouts(program file name, respond, **limits) -> (AgentRollouts, backend)."""

    def build(program: str, respond: Callable[[str], str], wall_s: float = 30.0, **limits):
        backend = NonCanonicalBackend(tiny_tokenizer, respond)
        config = AgentConfig(program=str(PROGRAMS / program), wall_s=wall_s, concurrency=4)
        rollout_limits = RolloutLimits(**{"max_turns": 6, "max_tool_calls": 6, **limits})
        return AgentRollouts(
            backend, "qwen_tool", AgentProgram.from_config(config), config, rollout_limits
        ), backend

    return build
