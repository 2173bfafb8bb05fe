"""Group filters: which prompts' sample groups reach the update. `apply(groups) -> FilterResult`."""

from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from trainers.registry import Registry, RegistryError
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
    """A registered filter knows its registry `name`: checkpoints store names, and the loop adds
    filters by name (StarPO-S as the echo-trap remedy), never by class."""

    name: ClassVar[str] = ""  # set by FILTERS.register

    @abstractmethod
    def apply(self, groups: Groups) -> FilterResult: ...


class FilterRegistry(Registry[type[GroupFilter]]):
    """Registering a filter class also sets its `name`."""

    def register(self, name: str) -> Callable[[type[GroupFilter]], type[GroupFilter]]:
        add = super().register(name)

        def decorator(cls: type[GroupFilter]) -> type[GroupFilter]:
            if cls.__dict__.get("name", name) not in ("", name):  # its own name, not a parent's
                raise RegistryError(f"group filter {cls.__name__} is already registered as {cls.name!r}")
            cls.name = name
            return add(cls)

        return decorator


FILTERS = FilterRegistry("group filter")


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
