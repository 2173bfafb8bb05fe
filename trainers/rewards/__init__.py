"""Composable rewards: a registry of components and weighted, scheduled definitions over them."""

from trainers.rewards import (  # noqa: F401  (each import registers its component)
    artist,
    correctness,
    env,
    format,
    judge,
    otc,
    overlong,
    posted,
    tool_n1,
    toolrl,
    torl,
)
from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.catalog import describe_components, schedule_schema
from trainers.rewards.composite import ComponentSpec, RewardDefinition
from trainers.rewards.sample import score_text

__all__ = [
    "REWARDS",
    "ComponentSpec",
    "RewardComponent",
    "RewardContext",
    "RewardDefinition",
    "describe_components",
    "schedule_schema",
    "score_text",
]
