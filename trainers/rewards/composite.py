"""A reward definition: a weighted sum of registered components, each weight optionally scheduled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from trainers.rewards.base import REWARDS, RewardComponent, RewardContext
from trainers.rewards.schedules import Schedule
from trainers.trajectory import Trajectory


def _located(prefix: str, loc: tuple, message: str) -> str:
    """'params.mode: message'; an error of the parameters as a whole (empty loc) under 'params'."""
    return f"{'.'.join([prefix, *map(str, loc)])}: {message}"


class ComponentSpec(BaseModel):
    """One term of the sum: a registered component, its parameters, weight and schedule."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., description="registered reward component")
    label: str | None = Field(None, description="key under which the score is recorded; default: name")
    weight: float = Field(1.0, description="weight in the total (multiplied by the schedule)")
    params: dict[str, Any] = Field(default_factory=dict, description="the component's parameters")
    schedule: Schedule | None = Field(None, description="multiplier of the weight over training steps")

    _component: RewardComponent = PrivateAttr()

    @model_validator(mode="after")
    def _build(self) -> ComponentSpec:
        if self.name not in REWARDS:
            raise ValueError(f"unknown reward component {self.name!r}; known: {', '.join(REWARDS.names())}")
        try:
            self._component = REWARDS.get(self.name)(**self.params)
        except ValidationError as exc:
            where = "; ".join(_located("params", e["loc"], e["msg"]) for e in exc.errors())
            raise ValueError(f"{self.name}: {where}") from None
        return self

    @property
    def key(self) -> str:
        return self.label or self.name

    @property
    def component(self) -> RewardComponent:
        return self._component

    def weight_at(self, step: int, total_steps: int | None) -> float:
        scale = self.schedule.value_at(step, total_steps) if self.schedule else 1.0
        return self.weight * scale


class RewardDefinition(BaseModel):
    """R = sum_k weight_k(step) * r_k; every r_k is recorded on the trajectory under its key."""

    model_config = ConfigDict(extra="forbid")

    components: list[ComponentSpec] = Field(..., min_length=1, description="the terms of the weighted sum")

    @model_validator(mode="after")
    def _unique_keys(self) -> RewardDefinition:
        keys = [c.key for c in self.components]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate component keys {dupes}: give repeated components a label")
        return self

    def weights_at(self, step: int, total_steps: int | None = None) -> dict[str, float]:
        return {c.key: c.weight_at(step, total_steps) for c in self.components}

    def compute(self, trajectories: Sequence[Trajectory], ctx: RewardContext) -> None:
        """Fill each trajectory's `rewards` (raw component values and sub-scores) and weighted `reward`;
        a failed episode (`metadata["failure"]`, e.g. an agent program that crashed) gets reward 0."""
        groups: dict[str, list[Trajectory]] = {}
        for traj in trajectories:
            groups.setdefault(traj.group_id, []).append(traj)
        weights = self.weights_at(ctx.step, ctx.total_steps)
        for traj in trajectories:
            traj.reward = 0.0
        for spec in self.components:
            scored = spec.component.score_batch(list(groups.values()), ctx)
            for group, scores in zip(groups.values(), scored, strict=True):
                for traj, value in zip(group, scores, strict=True):
                    traj.rewards[spec.key] = float(value)
                    for part, part_value in spec.component.parts(traj, ctx).items():
                        traj.rewards[f"{spec.key}/{part}"] = float(part_value)
                    traj.reward += weights[spec.key] * float(value)
        for traj in trajectories:
            if traj.metadata.get("failure"):  # an agent episode that crashed, hung or ran out of budget
                traj.reward = 0.0
