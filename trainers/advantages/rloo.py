"""RLOO (Ahmadian et al., arXiv 2402.14740, eq. 7): A_i = r_i - mean_{j != i} r_j within a prompt's group."""

from __future__ import annotations

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    group_indices,
    outcome_result,
)


@ESTIMATORS.register("rloo")
class RLOO(AdvantageEstimator):
    compares_group_samples = True

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        scalars = batch.rewards.new_zeros(batch.rewards.shape)
        for rows in group_indices(batch.group_ids).values():
            if len(rows) < 2:
                continue  # no other sample to compare with: no signal
            r = batch.rewards[rows]
            scalars[rows] = r - (r.sum() - r) / (len(rows) - 1)
        return outcome_result(scalars, batch)
