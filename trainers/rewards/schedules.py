"""Weight schedules over training steps: constant, linear, step, and ToolRL's dynamic reward scale."""

from __future__ import annotations

from bisect import bisect_right
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# the authors' code (ToolRL, SCHEDULEREWARD) moves the scales over 150 steps
TOOLRL_DEFAULT_STEPS = 150


def _progress(step: int, start_step: int, steps: int) -> float:
    return min(max((step - start_step) / steps, 0.0), 1.0)


class ConstantSchedule(BaseModel):
    """The same multiplier at every step."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["constant"] = Field("constant", description="schedule kind")
    value: float = Field(1.0, description="multiplier of the component's weight")

    def value_at(self, step: int, total_steps: int | None) -> float:
        return self.value


class LinearSchedule(BaseModel):
    """From `start` to `end` linearly over `steps` steps after `start_step`, then held."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["linear"] = Field("linear", description="schedule kind")
    start: float = Field(1.0, description="multiplier at start_step")
    end: float = Field(1.0, description="multiplier after start_step + steps")
    start_step: int = Field(0, ge=0, description="step where the ramp begins")
    steps: int | None = Field(None, ge=1, description="length of the ramp; default: the run's total steps")

    def value_at(self, step: int, total_steps: int | None) -> float:
        span = self.steps or total_steps or 1
        return self.start + (self.end - self.start) * _progress(step, self.start_step, span)


class StepSchedule(BaseModel):
    """Piecewise constant: `values[i]` from `boundaries[i-1]` (inclusive) to `boundaries[i]`."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["step"] = Field("step", description="schedule kind")
    boundaries: list[int] = Field(..., description="ascending steps where the multiplier changes")
    values: list[float] = Field(..., description="one more value than boundaries")

    @model_validator(mode="after")
    def _shapes(self) -> StepSchedule:
        if len(self.values) != len(self.boundaries) + 1:
            raise ValueError("values needs exactly one more entry than boundaries")
        if any(b >= a for b, a in zip(self.boundaries, self.boundaries[1:], strict=False)):
            raise ValueError("boundaries must be strictly ascending")
        return self

    def value_at(self, step: int, total_steps: int | None) -> float:
        return self.values[bisect_right(self.boundaries, step)]


class ToolRLDynamicSchedule(BaseModel):
    """ToolRL's dynamic reward scale (arXiv 2504.13958, the "Dynamic" reward-scale variant), as the
    authors' code implements it: over S steps the format reward's maximum falls linearly from 2 to 1
    and the correctness range widens from [-2, 2] to [-3, 3].

    As multipliers of R_format in {0, 1} and R_correct in [-3, 3]: format 2 - p, correct (2 + p) / 3,
    p = min(step / S, 1). The authors' code also lowers a wrong format's value to between -2 and -1;
    the paper defines R_format in {0, 1}, which this keeps.
    """

    model_config = ConfigDict(extra="forbid")
    name: Literal["toolrl_dynamic"] = Field("toolrl_dynamic", description="schedule kind")
    part: Literal["format", "correct"] = Field(..., description="which ToolRL reward this scales")
    steps: int | None = Field(None, ge=1, description="S; default: the run's total steps, else 150")

    def value_at(self, step: int, total_steps: int | None) -> float:
        p = _progress(step, 0, self.steps or total_steps or TOOLRL_DEFAULT_STEPS)
        return 2.0 - p if self.part == "format" else (2.0 + p) / 3.0


Schedule = Annotated[
    ConstantSchedule | LinearSchedule | StepSchedule | ToolRLDynamicSchedule, Field(discriminator="name")
]
