"""StarPO-S variance filtering (RAGEN, arXiv 2504.20073, sec. 4.2): keep the top `keep_fraction` of
groups by within-group reward std (the paper keeps 25%), dropping near-deterministic prompts.

Count kept = floor(keep_fraction * groups) as RAGEN's int(), but at least one; ties keep the earlier group.
"""

from __future__ import annotations

from trainers.filters.base import FILTERS, FilterResult, GroupFilter, Groups, reward_std


@FILTERS.register("starpo_s")
class StarPOS(GroupFilter):
    def __init__(self, keep_fraction: float = 0.25) -> None:
        if not 0.0 < keep_fraction <= 1.0:
            raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
        self.keep_fraction = keep_fraction  # share of groups kept, highest reward std first

    def apply(self, groups: Groups) -> FilterResult:
        if not groups:
            return FilterResult({})
        count = max(1, int(self.keep_fraction * len(groups) + 1e-9))
        ranked = sorted(groups, key=lambda gid: -reward_std(groups[gid]))  # stable: ties keep order
        chosen = set(ranked[:count])
        kept = {gid: g for gid, g in groups.items() if gid in chosen}
        dropped = {gid: g for gid, g in groups.items() if gid not in chosen}
        return FilterResult(kept, dropped)
