"""One evaluation of a model on a dataset file: the config (`EvalConfig`) and `evaluate_config`.

`python -m trainers eval CONFIG` and the workbench's evaluation task both call `evaluate_config`, so an
evaluation means the same in both. The model is a local `from_pretrained` directory (a run's checkpoint
is one) or the bundled tiny model; template, tools, limits, sampling and reward are the run config's
sections. Importing this module stays cheap: torch and transformers are imported when it evaluates.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trainers.config.agent import AGENT_TEMPLATES, AgentConfig
from trainers.config.limits import RolloutLimits
from trainers.config.loader import ConfigError, _read, error_list
from trainers.config.sampling import SamplingParams
from trainers.config.sections import ModelConfig, TemplateConfig, ToolBindingConfig
from trainers.rewards import RewardDefinition

if TYPE_CHECKING:
    from trainers.rollout.protocol import Rollouts
    from trainers.trajectory import Trajectory

# the run config's sections an evaluation takes over as they are
RUN_SECTIONS = ("model", "template", "tools", "limits", "sampling", "reward")


def _default_reward() -> RewardDefinition:
    return RewardDefinition(components=[{"name": "correctness"}])


class EvalConfig(BaseModel):
    """A model, the run config's template, tools, limits, sampling and reward, a dataset file and k."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("eval", min_length=1, description="a short name for the evaluation")
    seed: int = Field(0, ge=0, description="sampling and environment seed")
    output_dir: str = Field("evals/eval", min_length=1, description="where the tiny model is built")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the model evaluated")
    template: TemplateConfig = Field(default_factory=TemplateConfig, description="the chat template")
    tools: list[ToolBindingConfig] = Field(default_factory=list, description="tools the policy may call")
    limits: RolloutLimits = Field(default_factory=RolloutLimits, description="call, turn and token budgets")
    sampling: SamplingParams = Field(default_factory=SamplingParams, description="sampling of every sample")
    reward: RewardDefinition = Field(default_factory=_default_reward, description="reward of each sample")
    data_path: str = Field(..., min_length=1, description="JSONL of rows: id, question, answer, ...")
    prompt_key: str = Field("question", min_length=1, description="row field holding the question")
    max_problems: int | None = Field(None, ge=1, description="evaluate on at most this many rows")
    samples: int = Field(4, ge=1, le=256, description="k: samples per prompt (pass@k)")
    max_batch_size: int = Field(64, ge=1, description="rows per generation forward")
    trajectories: str | None = Field(None, description="also write every trajectory here (JSONL)")
    agent: AgentConfig | None = Field(
        None,
        description="an agent program plays each sample instead of the built-in rollout (docs/agents.md)",
    )

    @model_validator(mode="after")
    def _agent_fits(self) -> EvalConfig:
        if self.agent is not None and self.template.name not in AGENT_TEMPLATES:
            raise ValueError(f"an agent evaluation needs template.name among {', '.join(AGENT_TEMPLATES)}")
        if self.agent is not None and self.tools:
            raise ValueError("an agent evaluation: the agent program brings its tools; leave tools empty")
        return self


def validate_eval_config(data: Any, source: str = "eval config") -> EvalConfig:
    """An EvalConfig from plain data; raises ConfigError naming each bad key."""
    try:
        return EvalConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(error_list(exc, data), source) from None


def load_eval_config(path: str | Path) -> EvalConfig:
    """Read a JSON or YAML (.yaml/.yml) evaluation config and validate it."""
    return validate_eval_config(_read(Path(path)), str(path))


def eval_config_from_run(run_config: dict[str, Any], **fields: Any) -> EvalConfig:
    """An evaluation with a run config's model, template, tools, limits, sampling and reward; `fields`
    set the rest (data_path, samples...) and may replace a section."""
    data = {key: run_config[key] for key in RUN_SECTIONS if key in run_config}
    rollout = run_config.get("rollout") or {}
    if rollout.get("backend") == "agent":  # the run's agent program plays the evaluation too
        data["agent"] = rollout.get("agent")
    return validate_eval_config({"seed": run_config.get("seed", 0), **data, **fields})


def resolve_eval_model(config: EvalConfig) -> Path:
    """`model.path`; "tiny" builds the bundled tiny model (`model.tiny`) in the output directory once."""
    if config.model.path != "tiny":
        path = Path(config.model.path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"model path {path} holds no model (no config.json)")
        return path
    tiny = config.model.tiny
    if tiny.tokenizer_corpus != "default":
        raise ValueError(
            "model.tiny.tokenizer_corpus 'sft_data' needs a run's SFT data: evaluate its checkpoint"
        )
    target = Path(config.output_dir) / "base_model"
    if (target / "config.json").exists():
        return target
    from trainers.models.tiny import build_tiny_model

    sizes = tiny.model_dump(include={"hidden_size", "num_layers", "num_heads", "num_kv_heads"})
    return build_tiny_model(target, seed=config.seed, **sizes)


def judge_mode(reward: RewardDefinition) -> str:
    """Answers are judged the way the definition's correctness component judges them (math by default)."""
    for spec in reward.components:
        if spec.name == "correctness":
            return spec.params.get("mode", "math")
    return "math"


def finite(metrics: dict[str, float]) -> dict[str, float | None]:
    """The metrics with NaN and infinities as None (JSON has no NaN)."""
    return {key: value if math.isfinite(value) else None for key, value in metrics.items()}


def evaluate_config(
    config: EvalConfig, *, model: Any = None, tokenizer: Any = None
) -> tuple[dict, list[Trajectory]]:
    """Sample `samples` trajectories per row, score them with the reward definition and judge each answer;
    returns (metrics, trajectories).

    Metrics: `summarise`'s (accuracy, pass@k, tool-call rate, calls per solved, failed calls, response
    length...) plus `pass@1`, the mean reward, and the counts (`problems`, `samples`, `trajectories`).
    Each trajectory's `metadata["correct"]` holds its verdict. Pass a live `model` and `tokenizer` to
    skip loading. Writes the trajectories to `config.trajectories` when set.
    """
    import torch

    from trainers.models.device import resolve_device
    from trainers.models.model_io import load_policy
    from trainers.rewards import RewardContext
    from trainers.training.data import read_rows
    from trainers.training.evaluate import correctness_judge, pass_at_k, summarise

    if model is None:
        model, tokenizer = load_policy(resolve_eval_model(config), tokenizer_path=config.model.tokenizer_path)
        model.to(resolve_device(config.model.device))
    elif tokenizer is None:
        raise ValueError("a live model needs its tokenizer")
    model.eval()
    rows = read_rows(config.data_path, config.prompt_key)
    rows = rows[: config.max_problems] if config.max_problems else rows
    if not rows:
        raise ValueError(f"{config.data_path} holds no rows to evaluate")
    with torch.no_grad():
        trajectories = _rollouts(config, model, tokenizer).run(rows, config.samples, seed=config.seed)
    config.reward.compute(trajectories, RewardContext(template=config.template.name))
    is_correct = correctness_judge(judge_mode(config.reward))
    for traj in trajectories:
        traj.metadata["correct"] = bool(is_correct(traj))
    metrics = summarise(trajectories, lambda traj: traj.metadata["correct"], config.samples)
    groups: dict[str, list[bool]] = {}
    for traj in trajectories:
        groups.setdefault(traj.group_id, []).append(traj.metadata["correct"])
    metrics["pass@1"] = sum(pass_at_k(len(g), sum(g), 1) for g in groups.values()) / len(groups)
    metrics["reward_mean"] = sum(t.reward for t in trajectories) / len(trajectories)
    metrics.update(
        problems=float(len(rows)), samples=float(config.samples), trajectories=float(len(trajectories))
    )
    if config.trajectories:
        out = Path(config.trajectories)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            for traj in trajectories:
                handle.write(traj.to_json() + "\n")
    return metrics, trajectories


def _rollouts(config: EvalConfig, model: Any, tokenizer: Any) -> Rollouts:
    """The built-in engine with the config's tools, or the config's agent program."""
    from trainers.agent.program import AgentProgram
    from trainers.agent.rollouts import AgentRollouts
    from trainers.backends.hf import HFBackend
    from trainers.rollout.engine import RolloutEngine

    backend = HFBackend(model, tokenizer, max_batch_size=config.max_batch_size)
    if config.agent is not None:
        program = AgentProgram.from_config(config.agent)
        return AgentRollouts(
            backend, config.template.name, program, config.agent, config.limits, config.sampling
        )
    bindings = [binding.model_dump() for binding in config.tools]
    return RolloutEngine(
        backend,
        config.template.name,
        bindings,
        config.limits,
        config.sampling,
        prompt_source=config.template.source,
    )
