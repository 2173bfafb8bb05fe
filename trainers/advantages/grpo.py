"""GRPO outcome supervision (DeepSeekMath, arXiv 2402.03300, sec. 4.1.2).

A_i = (r_i - mean(r)) / (std(r) + eps) over the G samples of a prompt, on every token of o_i.

The paper does not say which std; like TRL and verl we use the sample std (n - 1) by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
    group_indices,
    group_std,
    outcome_result,
)

if TYPE_CHECKING:
    import torch


def group_normalised(
    rewards: torch.Tensor, group_ids: list[str], *, scale: bool, unbiased: bool, eps: float
) -> torch.Tensor:
    """(r - group mean), divided by (group std + eps) when `scale`; shared by GRPO and Dr.GRPO."""
    out = rewards.new_zeros(rewards.shape)
    for rows in group_indices(group_ids).values():
        r = rewards[rows]
        centred = r - r.mean()
        out[rows] = centred / (group_std(r, unbiased) + eps) if scale else centred
    return out


class GRPOParams(EstimatorParams):
    eps: float = Field(1e-6, gt=0.0, description="added to the group std before dividing")
    unbiased_std: bool = Field(True, description="sample std (n-1) rather than population std")


@ESTIMATORS.register("grpo")
class GRPO(AdvantageEstimator):
    Params = GRPOParams
    compares_group_samples = True

    def __init__(self, eps: float = 1e-6, unbiased_std: bool = True) -> None:
        self.eps = eps  # keeps a zero-variance group at advantage 0 instead of 0/0
        self.unbiased_std = unbiased_std  # sample std (n-1); False = population std (n)

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        scalars = group_normalised(
            batch.rewards, batch.group_ids, scale=True, unbiased=self.unbiased_std, eps=self.eps
        )
        return outcome_result(scalars, batch)
