"""Sampling parameters shared by every generation backend."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SamplingParams(BaseModel):
    """Temperature 0 means greedy decoding."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    seed: int | None = None
