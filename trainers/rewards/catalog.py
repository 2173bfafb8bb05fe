"""What the workbench's reward-definition form offers: each component with its parameter schema."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from trainers.rewards.base import REWARDS
from trainers.rewards.schedules import Schedule


def describe_components() -> list[dict[str, Any]]:
    """[{name, description, params_schema}] for every registered component, sorted by name."""
    return [
        {
            "name": name,
            "description": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
            "params_schema": cls.Params.model_json_schema(),
        }
        for name, cls in REWARDS.items()
    ]


def schedule_schema() -> dict[str, Any]:
    """JSON Schema of a weight schedule (constant, linear, step, toolrl_dynamic)."""
    return TypeAdapter(Schedule).json_schema()
