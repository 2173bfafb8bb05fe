"""PPO advantages with a critic: GAE(gamma, lambda) over policy tokens (InstructGPT-style token rewards).

Rewards: batch.token_rewards, or the outcome reward on the last policy token; optional KL penalty
folded in per token. Masked (tool / glue) positions are skipped, see `trainers.advantages.tokens`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
    turn_means,
)
from trainers.advantages.tokens import gae, masked_whiten, token_level_rewards


class PPOParams(EstimatorParams):
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount of token rewards")
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda")
    whiten_advantages: bool = Field(True, description="normalise advantages over the batch")
    kl_in_reward: float = Field(0.0, ge=0.0, description="coefficient of the KL folded into the token reward")

    def estimator_kwargs(self) -> dict[str, Any]:
        return {
            "gamma": self.gamma,
            "lam": self.gae_lambda,
            "kl_coef": self.kl_in_reward,
            "whiten": self.whiten_advantages,
        }


@ESTIMATORS.register("ppo")
class PPO(AdvantageEstimator):
    Params = PPOParams
    needs_values = True

    def __init__(
        self, gamma: float = 1.0, lam: float = 0.95, kl_coef: float = 0.0, whiten: bool = True
    ) -> None:
        self.gamma = gamma  # 1.0: a response is one short episode, no need to discount
        self.lam = lam  # GAE bias/variance trade-off
        self.kl_coef = kl_coef  # beta of the per-token KL penalty folded into rewards; 0 = none
        self.whiten = whiten  # normalise advantages over the batch's policy tokens (verl, CleanRL)

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        if batch.values is None:
            raise ValueError("ppo needs batch.values, the critic's value of each response token")
        mask = batch.response_mask
        rewards = token_level_rewards(batch, self.kl_coef)
        advantages, returns = gae(rewards, batch.values, mask, self.gamma, self.lam)
        if self.whiten:
            advantages = masked_whiten(advantages, mask)
        return AdvantageResult(advantages, returns, turn_means(advantages, mask, batch.steps))
