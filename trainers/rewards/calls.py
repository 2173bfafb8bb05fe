"""Tool calls as plain dicts, for rewards that compare predicted calls with ground-truth calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainers.trajectory import ToolCall, Trajectory, Turn


@dataclass(frozen=True)
class Call:
    """A call reduced to what the rewards compare: the tool name and its arguments."""

    name: str
    arguments: dict[str, Any]


def ground_truth_calls(ground_truth: dict[str, Any], key: str = "tool_calls") -> list[Call]:
    """Ground-truth calls from `ground_truth[key]`: a list (or JSON list) of {name, arguments|parameters}."""
    raw = ground_truth.get(key) or []
    if isinstance(raw, str):
        raw = json.loads(raw)
    if isinstance(raw, dict):
        raw = [raw]
    return [Call(str(c["name"]), _arguments(c)) for c in raw]


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    # ToolRL's data names them "parameters", OpenAI-style data "arguments", sometimes as a JSON string
    args = call.get("arguments", call.get("parameters")) or {}
    return dict(json.loads(args) if isinstance(args, str) else args)


def predicted_calls(calls: list[ToolCall]) -> list[Call]:
    return [Call(c.name, dict(c.arguments)) for c in calls]


def any_malformed(calls: list[ToolCall]) -> bool:
    return any(c.parse_error is not None for c in calls)


def first_assistant_turn(trajectory: Trajectory) -> Turn | None:
    """The turn scored by single-step tool-call rewards (ToolRL, Tool-N1 split tasks into single steps)."""
    turns = trajectory.assistant_turns
    return turns[0] if turns else None


def target_turn(trajectory: Trajectory) -> Turn | None:
    """The turn a single-step instance asks for: the first assistant turn the policy sampled.

    Tool-N1's split (`trainers.data_prep.tool_n1`) puts the earlier steps into the prompt, so in a
    rollout this is the first assistant turn; earlier steps replayed as turns (assistant turns whose
    tokens are all masked out of the loss: context, not samples) are skipped.
    """
    for turn in trajectory.assistant_turns:
        if turn.loss_mask and not any(turn.loss_mask):
            continue
        return turn
    return None
