"""DAPO soft overlong punishment (arXiv 2503.14476, eq. 13) on the trajectory's policy-token count |y|.

R = 0 if |y| <= L_max - L_cache; ((L_max - L_cache) - |y|) / L_cache if L_max - L_cache < |y| <= L_max;
-1 if |y| > L_max.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.trajectory import Trajectory


class OverlongParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_length: int = Field(512, ge=1, description="L_max: policy tokens beyond which the penalty is -1")
    cache_length: int = Field(128, ge=1, description="L_cache: the soft-penalty interval before L_max")

    @model_validator(mode="after")
    def _cache_fits(self) -> OverlongParams:
        if self.cache_length > self.max_length:
            raise ValueError("cache_length must not exceed max_length")
        return self


def overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    start = max_length - cache_length
    if length <= start:
        return 0.0
    if length <= max_length:
        return (start - length) / cache_length
    return -1.0


@REWARDS.register("overlong")
class Overlong(RewardComponent):
    """A penalty growing linearly from 0 to -1 across the last L_cache tokens before L_max."""

    name = "overlong"
    Params = OverlongParams
    params: OverlongParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return overlong_penalty(
            trajectory.num_policy_tokens, self.params.max_length, self.params.cache_length
        )
