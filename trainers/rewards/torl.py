"""ToRL reward (arXiv 2503.23383, sec. 2): +1 correct, -1 incorrect, and -0.5 when executed code failed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.correctness import CorrectnessParams, Mode, is_correct
from trainers.trajectory import Trajectory


class ToRLParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = Field("math", description="how the final answer is compared with the ground truth")
    correct: float = Field(1.0, description="reward of a correct answer")
    incorrect: float = Field(-1.0, description="reward of a wrong or missing answer")
    failed_code_penalty: float = Field(
        0.5,
        ge=0.0,
        description="subtracted when any executed call failed (the paper's code-executability term)",
    )


def has_failed_execution(trajectory: Trajectory) -> bool:
    """A call was executed and failed; calls skipped past the call budget do not count."""
    return any(r.executed and not r.ok for r in trajectory.tool_results)


@REWARDS.register("torl")
class ToRL(RewardComponent):
    """R = +1 / -1 by answer correctness, minus `failed_code_penalty` if the response ran failing code."""

    name = "torl"
    Params = ToRLParams
    params: ToRLParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        ok = is_correct(trajectory, CorrectnessParams(mode=self.params.mode))
        reward = self.params.correct if ok else self.params.incorrect
        if has_failed_execution(trajectory):
            reward -= self.params.failed_code_penalty
        return reward
