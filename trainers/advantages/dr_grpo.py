"""Dr. GRPO (arXiv 2503.20783, eq. 3): A_i = r_i - mean(r), no std division.

Its other half, no per-response length normalisation, is the `seq_mean_token_sum` loss aggregation.
"""

from __future__ import annotations

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    outcome_result,
)
from trainers.advantages.grpo import group_normalised


@ESTIMATORS.register("dr_grpo")
class DrGRPO(AdvantageEstimator):
    compares_group_samples = True
    loss_aggregation = "seq_mean_token_sum"  # each sequence's token-loss sum over a fixed budget

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        scalars = group_normalised(batch.rewards, batch.group_ids, scale=False, unbiased=True, eps=0.0)
        return outcome_result(scalars, batch)
