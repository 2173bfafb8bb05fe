"""The recipes of the brief as named presets: each is a partial config merged over the defaults.

Values marked "paper" are the paper's own; the rest are this project's choices for that recipe.
`preset_config(name, **overrides)` merges overrides (nested dicts or dotted keys) and validates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainers.config.loader import validate_config
from trainers.config.schema import RunConfig
from trainers.registry import Registry

NO_KL = {"kl": "none", "kl_coef": 0.0}
CODE_TOOL = [{"name": "python"}]


@dataclass(frozen=True)
class Preset:
    """A recipe: what it reproduces, the paper, and the config keys it sets."""

    title: str
    paper: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def config(self, **overrides: Any) -> RunConfig:
        return validate_config(deep_merge(self.overrides, expand_dotted(overrides)), f"preset {self.title}")


PRESETS: Registry[Preset] = Registry("preset")


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merge key by key; any other value (lists included) replaces the base's."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def expand_dotted(flat: dict[str, Any]) -> dict[str, Any]:
    """{"loss.clip_high": 0.3} -> {"loss": {"clip_high": 0.3}}; plain keys pass through."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = {leaf: value}
        for parent in reversed(parents):
            node = {parent: node}
        out = deep_merge(out, node)
    return out


def preset_config(name: str, **overrides: Any) -> RunConfig:
    """The named preset merged over the defaults, with `overrides` on top, validated."""
    return PRESETS.get(name).config(**overrides)


def register(name: str, title: str, paper: str, **overrides: Any) -> None:
    PRESETS.register(name)(Preset(title, paper, {"name": name, "output_dir": f"runs/{name}", **overrides}))


# ToRL: paper: GRPO without KL, temperature 1, 128 prompts x 16 samples, lr 1e-6, +1/-1 reward with the
# -0.5 code-failure term, at most C calls then plain text, last traceback line as the error.
register(
    "torl",
    "ToRL: tool-integrated RL with a code interpreter",
    "arXiv 2503.23383",
    template={"name": "torl"},
    tools=CODE_TOOL,
    limits={
        "max_tool_calls": 4,
        "on_tool_limit": "continue_text",
        "max_turns": 5,
        "tool_error_style": "last_line",
    },
    sampling={"temperature": 1.0},
    rollout={"prompts_per_step": 128, "samples_per_prompt": 16},
    reward={"components": [{"name": "torl"}]},
    algorithm={"estimator": "grpo"},
    loss=NO_KL,
    optimizer={"lr": 1e-6},
    training={"minibatch_size": 512},
)

# ToolRL: paper: GRPO without KL, R_format + R_correct on single-step tasks, with the dynamic
# reward scale (format 2 -> 1, correctness range 2 -> 3 over the run).
register(
    "toolrl",
    "ToolRL: fine-grained tool-call rewards with a dynamic scale",
    "arXiv 2504.13958",
    template={"name": "qwen_tool"},
    limits={"max_turns": 1},
    rollout={"prompts_per_step": 64, "samples_per_prompt": 4},
    reward={
        "components": [
            {
                "name": "toolrl",
                "label": "toolrl_format",
                "params": {"part": "format"},
                "schedule": {"name": "toolrl_dynamic", "part": "format"},
            },
            {
                "name": "toolrl",
                "label": "toolrl_correct",
                "params": {"part": "correct"},
                "schedule": {"name": "toolrl_dynamic", "part": "correct"},
            },
        ]
    },
    algorithm={"estimator": "grpo"},
    loss=NO_KL,
    optimizer={"lr": 1e-6},
    training={"steps": 150, "minibatch_size": 128},
)

_FROZENLAKE = {
    "template": {"name": "qwen_tool"},
    "tools": [{"name": "frozenlake"}],
    "limits": {"max_turns": 5, "max_tool_calls": 10},
    "rollout": {"prompts_per_step": 8, "samples_per_prompt": 16},
    "reward": {"components": [{"name": "env"}]},
    "optimizer": {"lr": 1e-6},
    "training": {"minibatch_size": 32},
}

# RAGEN StarPO: trajectory-level optimisation of multi-turn episodes, env rewards summed per episode,
# normalised per group (the GRPO form), several rollouts of each initial state.
register(
    "starpo",
    "RAGEN StarPO: multi-turn trajectory-level RL",
    "arXiv 2504.20073",
    **deep_merge(_FROZENLAKE, {"algorithm": {"estimator": "grpo"}, "loss": {"kl": "k3", "kl_coef": 0.001}}),
)

# StarPO-S: paper: keep the top 25% of prompts by within-group reward std, a critic (PPO), decoupled
# clipping (clip-higher, DAPO's 0.2 / 0.28) and no KL term.
register(
    "starpo_s",
    "RAGEN StarPO-S: variance filtering, critic, clip-higher, no KL",
    "arXiv 2504.20073",
    **deep_merge(
        _FROZENLAKE,
        {
            "algorithm": {"estimator": "ppo", "gamma": 1.0, "gae_lambda": 1.0},
            "loss": {**NO_KL, "clip_low": 0.2, "clip_high": 0.28},
            "filters": [{"name": "starpo_s", "keep_fraction": 0.25}],
        },
    ),
)

# OTC-GRPO: paper: correctness times the sin-shaped efficiency relative to the group's fewest calls;
# here in its code-tool setting (the ToRL rollout).
register(
    "otc_grpo",
    "OTC-GRPO: correct answers with the fewest tool calls",
    "arXiv 2504.14870",
    template={"name": "torl"},
    tools=CODE_TOOL,
    limits={"max_tool_calls": 4, "on_tool_limit": "continue_text", "max_turns": 5},
    rollout={"prompts_per_step": 64, "samples_per_prompt": 8},
    reward={"components": [{"name": "otc", "params": {"variant": "grpo", "c": 1.0, "alpha": 1.0}}]},
    algorithm={"estimator": "grpo"},
    loss=NO_KL,
    optimizer={"lr": 1e-6},
    training={"minibatch_size": 128},
)

# GiGPO: paper: episode advantages plus anchor-state step advantages (omega = 1, gamma = 0.95,
# F = std), group size 8, KL 0.01.
register(
    "gigpo",
    "GiGPO: episode- and step-level group advantages",
    "arXiv 2505.10978",
    **deep_merge(
        _FROZENLAKE,
        {
            "limits": {"max_turns": 10, "max_tool_calls": 20},
            "rollout": {"samples_per_prompt": 8},
            "algorithm": {"estimator": "gigpo", "gigpo_omega": 1.0, "gigpo_gamma": 0.95, "gigpo_norm": "std"},
            "loss": {"kl": "k3", "kl_coef": 0.01},
        },
    ),
)

# Tool-N1: paper: binary reward (format and exact calls) on single-step instances, GRPO.
register(
    "tool_n1",
    "Tool-N1: binary format-and-exact-calls reward",
    "arXiv 2505.00024",
    template={"name": "tool_n1"},
    limits={"max_turns": 1},
    rollout={"prompts_per_step": 64, "samples_per_prompt": 5},
    reward={"components": [{"name": "tool_n1"}]},
    algorithm={"estimator": "grpo"},
    loss={"kl": "k3", "kl_coef": 0.001},
    optimizer={"lr": 1e-6},
    training={"minibatch_size": 64},
)

# ARTIST: paper: GRPO with answer, format and tool-execution rewards; tool output masked.
register(
    "artist",
    "ARTIST: agentic reasoning with tool integration",
    "arXiv 2505.01441",
    template={"name": "artist"},
    tools=CODE_TOOL,
    limits={"max_tool_calls": 4, "max_turns": 5},
    rollout={"prompts_per_step": 32, "samples_per_prompt": 6},
    reward={"components": [{"name": "artist"}]},
    algorithm={"estimator": "grpo"},
    loss=NO_KL,
    optimizer={"lr": 1e-6},
    training={"minibatch_size": 64},
)

# ZeroTIR: paper: RL from a base model with a code executor (REINFORCE++), drop groups with accuracy
# outside [0.2, 0.8], and past N_max calls inject the limit notice and let the model finish in text.
register(
    "zerotir",
    "ZeroTIR: RL from the base model with a code executor",
    "arXiv 2505.07773",
    template={"name": "torl"},
    tools=CODE_TOOL,
    limits={"max_tool_calls": 4, "on_tool_limit": "notice", "max_turns": 6},
    rollout={"prompts_per_step": 64, "samples_per_prompt": 8},
    reward={"components": [{"name": "correctness"}]},
    algorithm={"estimator": "reinforce_pp", "normalize": True},
    loss=NO_KL,
    filters=[{"name": "zerotir_band", "low": 0.2, "high": 0.8, "reward_key": "correctness"}],
    optimizer={"lr": 1e-6},
    training={"minibatch_size": 128},
)

# SFT then GRPO (ReTool's recipe, and the CPU demo's): warm-start on expert tool trajectories, then
# GRPO with a small KL to keep what SFT taught.
register(
    "sft_then_grpo",
    "SFT warm start on expert trajectories, then GRPO",
    "arXiv 2504.11536",
    template={"name": "qwen_tool"},
    tools=[{"name": "calculator"}],
    limits={"max_tool_calls": 2, "max_turns": 3},
    sft={"epochs": 3, "lr": 1e-4, "batch_size": 16},
    rollout={"prompts_per_step": 8, "samples_per_prompt": 8},
    reward={"components": [{"name": "correctness"}, {"name": "format", "weight": 0.1}]},
    algorithm={"estimator": "grpo"},
    loss={"kl": "k3", "kl_coef": 0.01},
    optimizer={"lr": 1e-5},
    training={"steps": 50, "minibatch_size": 32},
)
