"""Group filters, found by name: `FILTERS.get(name)(**params).apply(groups) -> FilterResult`."""

from trainers.filters import dapo_dynamic, starpo_s, zerotir_band  # noqa: F401 (registers)
from trainers.filters.base import (
    FILTERS,
    FilterResult,
    GroupFilter,
    Groups,
    apply_filters,
    group_trajectories,
    reward_std,
)

__all__ = [
    "FILTERS",
    "FilterResult",
    "GroupFilter",
    "Groups",
    "apply_filters",
    "group_trajectories",
    "reward_std",
]
