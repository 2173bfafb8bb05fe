"""REINFORCE++ (arXiv 2501.03262, sec. 3): token rewards r_t = 1[t = EOS] r - beta * KL_t, returns
G_t = sum_k gamma^(k-t) r_k, then advantages normalised over all policy tokens of the global batch.

Optional group baseline (the paper's REINFORCE++-baseline, later versions of 2501.03262): subtract
the prompt group's mean reward first. Optional history baseline (the survey's variant, not in the
paper): subtract a moving average of past batches' mean rewards; this makes the estimator stateful.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import Field, model_validator

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
    turn_means,
)
from trainers.advantages.grpo import group_normalised
from trainers.advantages.tokens import gae, masked_whiten, token_level_rewards


class ReinforcePPParams(EstimatorParams):
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount of token rewards")
    kl_in_reward: float = Field(0.0, ge=0.0, description="coefficient of the KL folded into the token reward")
    normalize: bool = Field(True, description="normalise advantages over the whole batch")
    history_baseline: bool = Field(False, description="subtract a moving average of rewards")
    history_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="momentum of that average")
    group_baseline: bool = Field(
        False,
        description="REINFORCE++-baseline, subtract the mean reward of the prompt's group "
        "before the batch normalisation (needs samples_per_prompt >= 2)",
    )

    @model_validator(mode="after")
    def _one_baseline(self) -> ReinforcePPParams:
        if self.group_baseline and self.history_baseline:
            raise ValueError("reinforce_pp: choose one of group_baseline and history_baseline")
        return self

    def estimator_kwargs(self) -> dict[str, Any]:
        kwargs = self.model_dump(exclude={"estimator", "kl_in_reward"})
        return {**kwargs, "kl_coef": self.kl_in_reward}

    def group_comparison(self) -> str | None:
        return "reinforce_pp's group_baseline" if self.group_baseline else None


@ESTIMATORS.register("reinforce_pp")
class ReinforcePP(AdvantageEstimator):
    Params = ReinforcePPParams

    def __init__(
        self,
        gamma: float = 1.0,
        kl_coef: float = 0.0,
        normalize: bool = True,
        history_baseline: bool = False,
        history_momentum: float = 0.9,
        group_baseline: bool = False,
    ) -> None:
        self.gamma = gamma  # discount of token rewards along the response
        self.kl_coef = kl_coef  # beta: per-token KL to the reference folded into rewards; 0 = none
        self.normalize = normalize  # global batch normalisation (the paper's baseline)
        self.history_baseline = history_baseline  # subtract a moving average of past batch rewards
        self.history_momentum = history_momentum  # b <- m * b + (1 - m) * batch mean
        self.group_baseline = group_baseline  # REINFORCE++-baseline: r - mean of the prompt's group
        self.baseline: float | None = None  # no history before the first batch

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        mask = batch.response_mask
        if (self.history_baseline or self.group_baseline) and batch.token_rewards is not None:
            raise ValueError("reinforce_pp: baselines shift outcome rewards; do not pass token_rewards")
        outcome = batch.rewards
        if self.group_baseline:
            outcome = group_normalised(outcome, batch.group_ids, scale=False, unbiased=True, eps=0.0)
        if self.history_baseline and self.baseline is not None:
            outcome = outcome - self.baseline
        rewards = token_level_rewards(replace(batch, rewards=outcome), self.kl_coef)
        returns, _ = gae(rewards, mask * 0, mask, self.gamma, 1.0)  # lambda 1, V 0: Monte Carlo returns
        advantages = masked_whiten(returns, mask) if self.normalize else returns
        if self.history_baseline:
            self._update_baseline(float(batch.rewards.mean()))
        return AdvantageResult(advantages, turn_advantages=turn_means(advantages, mask, batch.steps))

    def _update_baseline(self, batch_mean: float) -> None:
        if self.baseline is None:
            self.baseline = batch_mean
        else:
            m = self.history_momentum
            self.baseline = m * self.baseline + (1 - m) * batch_mean

    def state_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baseline = state.get("baseline")
