"""ReMax (arXiv 2310.10505, eq. 5): A_i = r_i - r(greedy response to the same prompt)."""

from __future__ import annotations

from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    outcome_result,
)


@ESTIMATORS.register("remax")
class ReMax(AdvantageEstimator):
    needs_greedy_baseline = True

    def compute(self, batch: AdvantageBatch) -> AdvantageResult:
        baselines = batch.baseline_rewards
        if baselines is None:
            raise ValueError("remax needs batch.baseline_rewards: the greedy response reward of each group")
        missing = sorted({g for g in batch.group_ids if g not in baselines})
        if missing:
            raise ValueError(f"remax: no greedy baseline reward for groups {missing}")
        baseline = batch.rewards.new_tensor([baselines[g] for g in batch.group_ids])
        return outcome_result(batch.rewards - baseline, batch)
