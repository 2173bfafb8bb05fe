"""The config of a standalone rollout (`python -m trainers rollout CONFIG`), in the run config's terms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.config.sections import ModelConfig, TemplateConfig, ToolBindingConfig


class RolloutRunConfig(BaseModel):
    """Model, template, tools, limits and sampling as in a training run, plus the dataset and output."""

    model_config = ConfigDict(extra="forbid")

    model: ModelConfig = Field(default_factory=ModelConfig, description="the policy model")
    template: TemplateConfig = Field(default_factory=TemplateConfig, description="the chat template")
    tools: list[ToolBindingConfig] = Field(default_factory=list, description="tools the policy may call")
    limits: RolloutLimits = Field(default_factory=RolloutLimits, description="call, turn and token budgets")
    sampling: SamplingParams = Field(default_factory=SamplingParams, description="rollout sampling")
    dataset: str = Field(..., description="JSONL of rows: id, question, answer, tool_calls, initial_state")
    prompt_key: str = Field("question", description="row field holding the question")
    max_rows: int | None = Field(None, ge=1, description="use only the first rows")
    samples_per_prompt: int = Field(1, ge=1, description="trajectories per row (one group)")
    seed: int | None = Field(0, description="sampling and environment seed; none = unseeded")
    max_batch_size: int = Field(64, ge=1, description="rows per generation forward")
    output: str = Field("trajectories.jsonl", description="where the trajectories go, one JSON per line")


def load_rollout_config(path: str | Path) -> RolloutRunConfig:
    """Read a YAML or JSON config file."""
    import json

    text = Path(path).read_text(encoding="utf-8")
    data: Any
    if str(path).lower().endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    return RolloutRunConfig.model_validate(data)


def read_rows(config: RolloutRunConfig) -> list[dict]:
    """Dataset rows with the question under `question` and an id (the line number when missing)."""
    import json

    rows = []
    with open(config.dataset, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if not line.strip():
                continue
            row = json.loads(line)
            row.setdefault("id", str(number))
            row["question"] = row.get(config.prompt_key, row.get("question", row.get("prompt", "")))
            rows.append(row)
            if config.max_rows is not None and len(rows) >= config.max_rows:
                break
    return rows
