"""ToolRL reward (arXiv 2504.13958, sec. 3.3): R = R_format in {0, 1} + R_correct in [-3, 3].

R_correct compares predicted calls P with ground-truth calls G: r_name = Jaccard of the tool names;
each matched pair (G_j, P_i) adds the Jaccard of their parameter names plus the number of parameters
whose value equals the truth; R_max = r_name + the pair scores of the best one-to-one matching (found
exactly, by dynamic programming over subsets); R_correct = 6 * R_max / S_max - 3 with
S_max = 1 + |G| + sum_j |keys(G_j)|. As in the authors' released code, names are compared as multisets
(the paper's sets when no tool repeats), only calls to the same tool are paired, a malformed call gives
-3, and a task whose truth has no call scores R_correct = 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.calls import (
    Call,
    any_malformed,
    first_assistant_turn,
    ground_truth_calls,
    predicted_calls,
)
from trainers.rewards.tags import exact_blocks
from trainers.trajectory import Trajectory

MAX_MATCHING_SIDE = 16  # the subset DP is exact but exponential in the smaller side


class ToolRLParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    part: Literal["both", "format", "correct"] = Field(
        "both", description="both: R_format + R_correct; format or correct alone, to schedule them apart"
    )
    calls_key: str = Field("tool_calls", description="ground-truth field holding the expected calls")
    response_key: str = Field(
        "response", description="when the ground truth has this field, a <response> block is required"
    )


def name_jaccard(truth: Sequence[str], pred: Sequence[str]) -> float:
    """|N_G ∩ N_P| / |N_G ∪ N_P| over multisets (a tool called twice counts twice); 1 when both empty."""
    if not truth and not pred:
        return 1.0
    a, b = Counter(truth), Counter(pred)
    inter = sum((a & b).values())
    return inter / (len(truth) + len(pred) - inter)


def key_jaccard(truth: set[str], pred: set[str]) -> float:
    return 1.0 if not truth and not pred else len(truth & pred) / len(truth | pred)


def pair_score(truth: Call, pred: Call) -> float:
    """Parameter-name Jaccard plus exact-value matches of one matched pair; 0 across different tools."""
    if truth.name != pred.name:
        return 0.0
    names = key_jaccard(set(truth.arguments), set(pred.arguments))
    values = sum(1 for k, v in truth.arguments.items() if k in pred.arguments and pred.arguments[k] == v)
    return names + values


def best_matching(weights: list[list[float]]) -> float:
    """Maximum total weight of a one-to-one matching of rows to columns; any may stay unmatched."""
    if weights and len(weights[0]) > len(weights):
        weights = [list(col) for col in zip(*weights, strict=True)]
    rows, cols = len(weights), len(weights[0]) if weights else 0
    if cols > MAX_MATCHING_SIDE:
        raise ValueError(f"too many calls to match exactly ({rows} x {cols})")

    @cache
    def best(row: int, used: int) -> float:
        if row == rows:
            return 0.0
        options = [best(row + 1, used)]
        for col in range(cols):
            if not used & (1 << col):
                options.append(weights[row][col] + best(row + 1, used | (1 << col)))
        return max(options)

    return best(0, 0)


def correctness_score(truth: list[Call], pred: list[Call]) -> float:
    """R_correct in [-3, 3] (ToolRL eq. for R_correct)."""
    if not truth:
        return 0.0
    s_max = 1 + len(truth) + sum(len(c.arguments) for c in truth)
    matched = best_matching([[pair_score(g, p) for p in pred] for g in truth]) if pred else 0.0
    s = name_jaccard([c.name for c in truth], [c.name for c in pred]) + matched
    return 6.0 * s / s_max - 3.0


def required_tags(has_calls: bool, has_response: bool) -> list[str]:
    return ["think"] + (["tool_call"] if has_calls else []) + (["response"] if has_response else [])


@REWARDS.register("toolrl")
class ToolRL(RewardComponent):
    """R_format (the tags the truth needs, in order) + R_correct (best call matching), on the first turn."""

    name = "toolrl"
    Params = ToolRLParams
    params: ToolRLParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        total = 0.0
        if self.params.part in ("both", "format"):
            total += self.format_score(trajectory)
        if self.params.part in ("both", "correct"):
            total += self.correct_score(trajectory)
        return total

    def format_score(self, trajectory: Trajectory) -> float:
        turn = first_assistant_turn(trajectory)
        truth = ground_truth_calls(trajectory.ground_truth, self.params.calls_key)
        tags = required_tags(bool(truth), self.params.response_key in trajectory.ground_truth)
        return 1.0 if turn is not None and exact_blocks(turn.text, tags, repeatable=("tool_call",)) else 0.0

    def correct_score(self, trajectory: Trajectory) -> float:
        truth = ground_truth_calls(trajectory.ground_truth, self.params.calls_key)
        turn = first_assistant_turn(trajectory)
        calls = turn.tool_calls if turn is not None else []
        if truth and any_malformed(calls):
            return -3.0
        return correctness_score(truth, predicted_calls(calls))
