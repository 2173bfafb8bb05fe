"""DAPO dynamic sampling (arXiv 2503.14476, eq. 11 and Alg. 1): drop groups whose rewards are all
equal (zero advantage, no gradient) and have the loop sample more until `target_groups` remain.

The paper states the condition on accuracy (not all right, not all wrong); on rewards, as verl's
default does, it also covers shaped rewards. With a pure outcome reward the two are the same.
"""

from __future__ import annotations

from trainers.filters.base import FILTERS, FilterResult, GroupFilter, Groups


@FILTERS.register("dapo_dynamic")
class DAPODynamic(GroupFilter):
    def __init__(self, target_groups: int | None = None, tolerance: float = 1e-6) -> None:
        self.target_groups = target_groups  # groups wanted per update; None = as many as came in
        self.tolerance = tolerance  # rewards closer than this count as equal

    def apply(self, groups: Groups) -> FilterResult:
        kept, dropped = {}, {}
        for gid, group in groups.items():
            rewards = [t.reward for t in group]
            target = kept if max(rewards) - min(rewards) > self.tolerance else dropped
            target[gid] = group
        wanted = len(groups) if self.target_groups is None else self.target_groups
        return FilterResult(kept, dropped, needs_refill=max(0, wanted - len(kept)))
