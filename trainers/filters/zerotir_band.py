"""ZeroTIR replay filtering (arXiv 2505.07773, sec. 3): drop groups whose accuracy is above `high`
or below `low` (kept: low <= accuracy <= high).

Accuracy = fraction of correct samples. A sample is correct when metadata["correct"] is set (a
flag from the rollout or an evaluator), else when its `reward_key` component (the total reward if
the trajectory has no such component) exceeds `threshold`.
"""

from __future__ import annotations

from trainers.filters.base import FILTERS, FilterResult, GroupFilter, Groups
from trainers.trajectory import Trajectory


@FILTERS.register("zerotir_band")
class ZeroTIRBand(GroupFilter):
    def __init__(
        self, low: float = 0.2, high: float = 0.8, reward_key: str = "correctness", threshold: float = 0.5
    ) -> None:
        self.low = low  # groups the policy almost never solves carry little signal
        self.high = high  # groups it almost always solves are already learned
        self.reward_key = reward_key  # reward component read as correctness
        self.threshold = threshold  # correct when that reward > threshold (1/0 and +1/-1 rewards alike)

    def is_correct(self, trajectory: Trajectory) -> bool:
        if "correct" in trajectory.metadata:
            return bool(trajectory.metadata["correct"])
        return trajectory.rewards.get(self.reward_key, trajectory.reward) > self.threshold

    def accuracy(self, group: list[Trajectory]) -> float:
        return sum(self.is_correct(t) for t in group) / len(group)

    def apply(self, groups: Groups) -> FilterResult:
        kept, dropped = {}, {}
        for gid, group in groups.items():
            target = kept if self.low <= self.accuracy(group) <= self.high else dropped
            target[gid] = group
        return FilterResult(kept, dropped)
