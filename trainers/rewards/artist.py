"""ARTIST reward (arXiv 2505.01441, sec. 3.3): answer, format and tool-execution sub-scores, weighted.

answer: 1 if the final answer (in `<answer>`) is correct; format: the response keeps the order
think -> tool -> output (every tool block followed by its `<output>`) and ends with one `<answer>`;
tool: successful calls / total calls (0 without calls). The default weights give a correct answer 2,
as we read the paper's math setting; every weight is a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.correctness import CorrectnessParams, Mode, is_correct
from trainers.rewards.tags import opening_tags, strip_special
from trainers.trajectory import Trajectory


class ArtistParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = Field("math", description="how the final answer is compared with the ground truth")
    answer_weight: float = Field(2.0, description="weight of the answer sub-score")
    format_weight: float = Field(1.0, description="weight of the format sub-score")
    tool_weight: float = Field(1.0, description="weight of the tool-execution sub-score")
    tool_tags: list[str] | None = Field(
        None, description="tags that hold a tool call; none = the names of the tools the trajectory called"
    )


def format_ok(text: str, tool_tags: Sequence[str]) -> bool:
    """think first, every tool block answered by an output, exactly one answer, at the end."""
    text = strip_special(text)
    seq = opening_tags(text, ["think", "output", "answer", *tool_tags])
    coded = "".join("C" if tag in tool_tags else tag[0].upper() for tag in seq)  # T, O, A or C
    if not re.fullmatch(r"T(?:T|CO)*A", coded):
        return False
    return text.rstrip().endswith("</answer>") and text.count("</answer>") == 1


def execution_ratio(trajectory: Trajectory) -> float:
    results = trajectory.tool_results
    return sum(1 for r in results if r.ok) / len(results) if results else 0.0


@REWARDS.register("artist")
class Artist(RewardComponent):
    """answer_weight * answer + format_weight * format + tool_weight * successful/total calls."""

    name = "artist"
    Params = ArtistParams
    params: ArtistParams

    def parts(self, trajectory: Trajectory, ctx: RewardContext) -> dict[str, float]:
        return {
            "answer": 1.0 if is_correct(trajectory, CorrectnessParams(mode=self.params.mode)) else 0.0,
            "format": 1.0 if format_ok(trajectory.response_text, self._tool_tags(trajectory)) else 0.0,
            "tool": execution_ratio(trajectory),
        }

    def _tool_tags(self, trajectory: Trajectory) -> list[str]:
        # ARTIST's template names each call's block after its tool: <python>...</python>
        if self.params.tool_tags is not None:
            return self.params.tool_tags
        return sorted({call.name for call in trajectory.tool_calls})

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        p = self.parts(trajectory, ctx)
        w = self.params
        return w.answer_weight * p["answer"] + w.format_weight * p["format"] + w.tool_weight * p["tool"]
