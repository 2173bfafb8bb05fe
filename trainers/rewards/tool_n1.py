"""Tool-N1 reward (arXiv 2505.00024, sec. 3): 1 only if the format is right AND the calls equal the truth.

Format: `<think>...</think>` then the `<tool_call>` blocks, nothing else. Calls are compared as
dictionaries (argument order ignored) and as a multiset (the order of parallel calls is ignored too).
The target turn of a single-step instance is scored (`calls.target_turn`): the first turn the policy
sampled after its context; `trainers.data_prep.tool_n1` splits multi-turn data into such instances.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.calls import (
    Call,
    any_malformed,
    ground_truth_calls,
    predicted_calls,
    target_turn,
)
from trainers.rewards.tags import exact_blocks
from trainers.trajectory import Trajectory

_THINK_FIRST = re.compile(r"\s*<think>.*?</think>", flags=re.DOTALL)


class ToolN1Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls_key: str = Field("tool_calls", description="ground-truth field holding the expected calls")


def format_ok(text: str, expects_calls: bool) -> bool:
    if expects_calls:
        return exact_blocks(text, ["think", "tool_call"], repeatable=("tool_call",))
    return bool(_THINK_FIRST.match(text)) and "<tool_call>" not in text


def calls_equal(truth: list[Call], pred: list[Call]) -> bool:
    """Same multiset of {name, arguments} dicts (dict equality ignores key order)."""
    if len(truth) != len(pred):
        return False
    unused = list(pred)
    for call in truth:
        match = next((p for p in unused if p == call), None)
        if match is None:
            return False
        unused.remove(match)
    return True


@REWARDS.register("tool_n1")
class ToolN1(RewardComponent):
    """Binary: FormatCorrect(O) and ToolCallMatch(a, a*)."""

    name = "tool_n1"
    Params = ToolN1Params
    params: ToolN1Params

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        turn = target_turn(trajectory)
        if turn is None or any_malformed(turn.tool_calls):
            return 0.0
        truth = ground_truth_calls(trajectory.ground_truth, self.params.calls_key)
        ok = format_ok(turn.text, bool(truth)) and calls_equal(truth, predicted_calls(turn.tool_calls))
        return 1.0 if ok else 0.0
