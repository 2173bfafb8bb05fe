"""Group filters: which prompts' sample groups reach the update. `apply(groups) -> FilterResult`."""

from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from trainers.registry import Registry
from trainers.trajectory import Trajectory

Groups = dict[str, list[Trajectory]]


@dataclass
class FilterResult:
    """Kept and dropped groups; `needs_refill` = how many more groups the loop should sample."""

    kept: Groups
    dropped: Groups = field(default_factory=dict)
    needs_refill: int = 0

    @property
    def filtered_frac(self) -> float:
        """Dropped groups / all groups seen (the `filter/filtered_frac` metric)."""
        total = len(self.kept) + len(self.dropped)
        return len(self.dropped) / total if total else 0.0

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for group in self.kept.values() for t in group]


class GroupFilter(ABC):
    @abstractmethod
    def apply(self, groups: Groups) -> FilterResult: ...


FILTERS: Registry[type[GroupFilter]] = Registry("group filter")


def group_trajectories(trajectories: Sequence[Trajectory]) -> Groups:
    """group_id -> its trajectories, in first-seen order."""
    groups: Groups = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    return groups


def reward_std(group: list[Trajectory]) -> float:
    """Sample std of the group's rewards (0 for a single sample)."""
    return statistics.stdev(t.reward for t in group) if len(group) > 1 else 0.0


def apply_filters(filters: Sequence[GroupFilter], groups: Groups) -> FilterResult:
    """Run filters in order; dropped groups accumulate, needs_refill is the largest any filter asked for."""
    kept, dropped, refill = dict(groups), {}, 0
    for f in filters:
        result = f.apply(kept)
        kept = result.kept
        dropped.update(result.dropped)
        refill = max(refill, result.needs_refill)
    return FilterResult(kept, dropped, refill)
