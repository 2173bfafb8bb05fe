"""The reward an agent posted for its episode (`POST /v1/episodes/{id}/reward`, AReaL's set_reward)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.trajectory import Trajectory


class PostedParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    missing: float = Field(0.0, description="the score of an episode that posted no reward")


@REWARDS.register("posted")
class PostedReward(RewardComponent):
    """The last reward the episode's agent posted to the endpoint; combine it with rule-based
    components (correctness, format, ...) in the same definition, each with its weight."""

    name = "posted"
    Params = PostedParams
    params: PostedParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        posted = trajectory.metadata.get("posted_reward")
        return self.params.missing if posted is None else float(posted)
