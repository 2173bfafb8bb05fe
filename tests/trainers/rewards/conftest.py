"""A factory of small trajectories for reward tests."""

from __future__ import annotations

from typing import Any

import pytest

from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


def build_trajectory(
    text: str = "",
    ground_truth: dict[str, Any] | None = None,
    *,
    calls: list[ToolCall] | None = None,
    results: list[ToolResult] | None = None,
    final_answer: str | None = None,
    group_id: str = "g",
    policy_tokens: int = 0,
    turns: list[Turn] | None = None,
) -> Trajectory:
    """A prompt turn plus one assistant turn holding `text`, its calls and their results."""
    prompt = Turn(role="prompt", text="Q", token_ids=[1], loss_mask=[0])
    answer = Turn(
        role="assistant",
        text=text,
        token_ids=list(range(policy_tokens)),
        loss_mask=[1] * policy_tokens,
        tool_calls=calls or [],
        tool_results=results or [],
    )
    return Trajectory(
        uid=f"{group_id}-{id(text)}",
        group_id=group_id,
        turns=[prompt, *(turns if turns is not None else [answer])],
        final_answer=final_answer,
        ground_truth=ground_truth or {},
    )


@pytest.fixture
def make_traj():
    return build_trajectory
