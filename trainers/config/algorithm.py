"""Run-config sections for learning: advantage estimator, policy loss, group filters.

Names match the registries of trainers.advantages (ESTIMATORS) and trainers.filters (FILTERS);
`estimator_kwargs`, `filter_kwargs` and `policy_loss_kwargs` give their constructors' arguments.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Estimator = Literal["grpo", "dr_grpo", "rloo", "reinforce_pp", "remax", "ppo", "gigpo"]
GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "gigpo")  # need several samples per prompt


class AlgorithmConfig(BaseModel):
    """The advantage estimator and its parameters (each used only by the estimators it names)."""

    model_config = ConfigDict(extra="forbid")

    estimator: Estimator = Field("grpo", description="advantage estimator")
    eps: float = Field(1e-6, gt=0.0, description="grpo, gigpo: added to the group std before dividing")
    unbiased_std: bool = Field(True, description="grpo, gigpo: sample std (n-1) rather than population std")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="ppo, reinforce_pp: discount of token rewards")
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0, description="ppo: GAE lambda")
    whiten_advantages: bool = Field(True, description="ppo: normalise advantages over the batch")
    kl_in_reward: float = Field(
        0.0, ge=0.0, description="ppo, reinforce_pp: coefficient of the KL folded into the token reward"
    )
    normalize: bool = Field(True, description="reinforce_pp: normalise advantages over the whole batch")
    history_baseline: bool = Field(False, description="reinforce_pp: subtract a moving average of rewards")
    history_momentum: float = Field(0.9, ge=0.0, lt=1.0, description="reinforce_pp: momentum of that average")
    group_baseline: bool = Field(
        False,
        description="reinforce_pp: REINFORCE++-baseline, subtract the mean reward of the prompt's group "
        "before the batch normalisation (needs samples_per_prompt >= 2)",
    )
    gigpo_omega: float = Field(1.0, ge=0.0, description="gigpo: weight of the step-level advantage")
    gigpo_gamma: float = Field(0.95, ge=0.0, le=1.0, description="gigpo: discount of step returns")
    gigpo_norm: Literal["std", "none"] = Field("std", description="gigpo: F = std or 1")
    gigpo_similarity: float | None = Field(
        None, gt=0.0, le=1.0, description="gigpo: group similar states above this; none = exact state hash"
    )

    def estimator_kwargs(self) -> dict[str, Any]:
        """Constructor arguments of `ESTIMATORS.get(self.estimator)`."""
        by_name: dict[str, dict[str, Any]] = {
            "grpo": {"eps": self.eps, "unbiased_std": self.unbiased_std},
            "dr_grpo": {},
            "rloo": {},
            "remax": {},
            "ppo": {
                "gamma": self.gamma,
                "lam": self.gae_lambda,
                "kl_coef": self.kl_in_reward,
                "whiten": self.whiten_advantages,
            },
            "reinforce_pp": {
                "gamma": self.gamma,
                "kl_coef": self.kl_in_reward,
                "normalize": self.normalize,
                "history_baseline": self.history_baseline,
                "history_momentum": self.history_momentum,
                "group_baseline": self.group_baseline,
            },
            "gigpo": {
                "gamma": self.gigpo_gamma,
                "omega": self.gigpo_omega,
                "norm": self.gigpo_norm,
                "eps": self.eps,
                "unbiased_std": self.unbiased_std,
                "similarity_threshold": self.gigpo_similarity,
            },
        }
        return by_name[self.estimator]

    @model_validator(mode="after")
    def _one_baseline(self) -> AlgorithmConfig:
        if self.estimator == "reinforce_pp" and self.group_baseline and self.history_baseline:
            raise ValueError("reinforce_pp: choose one of group_baseline and history_baseline")
        return self

    @property
    def compares_group_samples(self) -> bool:
        """True when advantages compare the samples of a prompt (samples_per_prompt must be >= 2)."""
        grouped_reinforce_pp = self.estimator == "reinforce_pp" and self.group_baseline
        return self.estimator in GROUP_ESTIMATORS or grouped_reinforce_pp


class LossConfig(BaseModel):
    """The clipped policy loss, its KL and entropy terms, and the value loss."""

    model_config = ConfigDict(extra="forbid")

    clip_low: float = Field(0.2, gt=0.0, lt=1.0, description="ratio floor 1 - clip_low")
    clip_high: float = Field(0.2, gt=0.0, description="ratio ceiling 1 + clip_high (DAPO clip-higher: 0.28)")
    dual_clip: float | None = Field(None, gt=1.0, description="c > 1 bounds losses of negative advantages")
    aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"] = Field(
        "token_mean", description="how token losses are averaged (DAPO: token_mean)"
    )
    kl: Literal["k1", "k2", "k3", "none"] = Field("none", description="KL estimator to the frozen reference")
    kl_coef: float = Field(0.0, ge=0.0, description="beta, weight of the KL term")
    entropy_coef: float = Field(0.0, ge=0.0, description="weight of the entropy bonus")
    value_coef: float = Field(0.5, ge=0.0, description="ppo: weight of the value loss")
    value_clip: float | None = Field(0.2, gt=0.0, description="ppo: clip range of the value loss; none = off")
    norm_constant: int | None = Field(
        None,
        ge=1,
        description="seq_mean_token_sum (Dr. GRPO): the fixed divisor of each sequence's token-loss sum; "
        "none = limits.max_total_new_tokens, the generation budget",
    )

    def policy_loss_kwargs(self, generation_budget: int | None = None) -> dict[str, Any]:
        """Arguments of trainers.losses.objective.PolicyLossConfig; `generation_budget` (the run's
        limits.max_total_new_tokens) is the seq_mean_token_sum divisor unless `norm_constant` is set."""
        constant = self.norm_constant or generation_budget
        return {
            "norm_constant": None if constant is None else float(constant),
            "eps_low": self.clip_low,
            "eps_high": self.clip_high,
            "dual_clip": self.dual_clip,
            "agg": self.aggregation,
            "kl_kind": self.kl,
            "kl_coef": self.kl_coef,
            "entropy_coef": self.entropy_coef,
        }


class MismatchConfig(BaseModel):
    """Train-inference mismatch: the sampler's log-probs (vLLM's kernels, another dtype) differ from the
    trainer's for the same tokens. Truncated importance sampling (Yao et al. 2025, verl's TIS) weights
    each token's policy loss by min(exp(logp_trainer_old - logp_sampler), tis_cap)."""

    model_config = ConfigDict(extra="forbid")

    old_logprobs: Literal["trainer", "sampler"] = Field(
        "trainer",
        description="the old policy of the clipped ratio: the trainer's recomputed log-probs, or the"
        " sampler's as they came with the rollout",
    )
    tis_cap: float | None = Field(
        None, ge=1.0, description="truncated importance sampling cap C (e.g. 2); none = off"
    )
    measure: bool = Field(
        False,
        description="report rollout/logprob_mismatch_mean and _max also when nothing else needs the"
        " trainer's log-probs before the update (one more forward pass; always on with vLLM or TIS)",
    )

    @model_validator(mode="after")
    def _tis_needs_trainer(self) -> MismatchConfig:
        if self.tis_cap is not None and self.old_logprobs == "sampler":
            raise ValueError(
                "mismatch.tis_cap corrects towards the trainer's log-probs: old_logprobs: trainer"
            )
        return self


class ZeroTIRBandFilter(BaseModel):
    """ZeroTIR: drop groups whose accuracy is above `high` or below `low`."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["zerotir_band"] = Field("zerotir_band", description="filter kind")
    low: float = Field(0.2, ge=0.0, le=1.0, description="lowest group accuracy kept")
    high: float = Field(0.8, ge=0.0, le=1.0, description="highest group accuracy kept")
    reward_key: str = Field("correctness", description="reward component read as correctness")
    threshold: float = Field(0.5, description="a sample is correct when that component exceeds this")


class StarPOSFilter(BaseModel):
    """StarPO-S: keep the groups with the highest within-group reward std."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["starpo_s"] = Field("starpo_s", description="filter kind")
    keep_fraction: float = Field(0.25, gt=0.0, le=1.0, description="share of groups kept")


class DapoDynamicFilter(BaseModel):
    """DAPO dynamic sampling: drop zero-variance groups and sample more to refill the batch."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["dapo_dynamic"] = Field("dapo_dynamic", description="filter kind")
    max_refill_rounds: int = Field(3, ge=0, description="extra sampling rounds per step to refill the batch")
    tolerance: float = Field(1e-6, ge=0.0, description="rewards closer than this count as equal")


FilterConfig = Annotated[ZeroTIRBandFilter | StarPOSFilter | DapoDynamicFilter, Field(discriminator="name")]

_LOOP_ONLY = {"name", "max_refill_rounds"}  # read by the training loop, not by the filter


def filter_kwargs(spec: ZeroTIRBandFilter | StarPOSFilter | DapoDynamicFilter) -> dict[str, Any]:
    """Constructor arguments of `FILTERS.get(spec.name)`."""
    return spec.model_dump(exclude=_LOOP_ONLY)
