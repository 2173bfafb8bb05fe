"""Environment reward for multi-turn environments (RAGEN StarPO, arXiv 2504.20073, sec. 3): per-step
rewards accumulated into a trajectory reward, summed or discounted: R = sum_t gamma^t r_t."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.trajectory import Trajectory


class EnvParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    aggregate: Literal["sum", "discounted"] = Field("sum", description="how per-step rewards accumulate")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount per step (discounted only)")


@REWARDS.register("env")
class EnvReward(RewardComponent):
    """Sum (or gamma-discounted sum) of the `env_reward` the environment returned after each step."""

    name = "env"
    Params = EnvParams
    params: EnvParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        steps = [t.env_reward for t in trajectory.turns if t.env_reward is not None]
        gamma = self.params.gamma if self.params.aggregate == "discounted" else 1.0
        return sum(r * gamma**t for t, r in enumerate(steps))
