"""Score one pasted model output under a reward definition (the workbench's "Test on a sample")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainers.rewards.base import NOTES_KEY, RewardContext
from trainers.rewards.composite import RewardDefinition
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


def _as_call(call: Any) -> ToolCall:
    return call if isinstance(call, ToolCall) else ToolCall(**call)


def _as_result(result: Any) -> ToolResult:
    return result if isinstance(result, ToolResult) else ToolResult(**result)


def trajectory_from_text(
    text: str,
    ground_truth: dict[str, Any],
    template: str,
    tool_results: list[Any] | None = None,
    encode: Callable[[str], list[int]] | None = None,
    tools: list[dict] | None = None,
) -> Trajectory:
    """One assistant turn parsed by the template (`tools`: the specs it may call, for templates that
    need them); `encode` gives the policy-token count the overlong penalty reads."""
    from trainers.templates import TEMPLATES  # lazy: templates import tokenizers and Jinja

    parsed = TEMPLATES.get(template)().parse(text, tools=tools)
    token_ids = list(encode(text)) if encode else []
    turn = Turn(
        role="assistant",
        text=text,
        token_ids=token_ids,
        loss_mask=[1] * len(token_ids),
        tool_calls=[_as_call(c) for c in parsed.tool_calls],
        tool_results=[_as_result(r) for r in tool_results or []],
        reasoning=parsed.reasoning,
    )
    return Trajectory(
        uid="sample",
        group_id="sample",
        turns=[turn],
        final_answer=parsed.final_answer,
        ground_truth=ground_truth,
    )


def score_text(
    definition: RewardDefinition | dict[str, Any],
    text: str,
    ground_truth: dict[str, Any],
    template: str,
    tool_results: list[Any] | None = None,
    *,
    step: int = 0,
    total_steps: int | None = None,
    encode: Callable[[str], list[int]] | None = None,
    tools: list[dict] | None = None,
) -> dict[str, Any]:
    """{"components": {key: raw score, "key/part": sub-score}, "weights": {key: weight}, "total": R,
    "notes": [why a score may not be a real comparison, e.g. an answer check that timed out]}."""
    if not isinstance(definition, RewardDefinition):
        definition = RewardDefinition.model_validate(definition)
    traj = trajectory_from_text(text, ground_truth, template, tool_results, encode, tools)
    ctx = RewardContext(step=step, total_steps=total_steps, template=template)
    definition.compute([traj], ctx)
    return {
        "components": dict(traj.rewards),
        "weights": definition.weights_at(step, total_steps),
        "total": traj.reward,
        "notes": list(traj.metadata.get(NOTES_KEY, [])),
    }
