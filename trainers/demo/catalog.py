"""What the workbench's demo needs from the calculator demo: its expert conversations (an SFT dataset
of the demo catalog) and the configs of its two demo runs, the short demo's recipe as a `RunConfig`.

Both runs build the tiny model in their run directory (its tokenizer trained on the SFT conversations),
warm-start it with SFT on experts of which half call the calculator, then train GRPO on ARTIST's answer
and tool-execution reward, as `tests/trainers/demo/test_demo.py` does:

- the learning run: temperature 1, lr 1e-3, no KL. Tool calls and reward rise within a few steps, and
  the echo-trap detector stays silent.
- the collapse run: the recipe of `tests/trainers/training/test_echo_trap_runs.py`: temperature 0.5 and
  a learning rate that climbs 2.5e-4 per step until the policy falls apart, which raises an alert.
"""

from __future__ import annotations

from typing import Any

from trainers.demo.arithmetic import make_splits
from trainers.demo.experts import make_experts

# The short demo's model: two layers of 64, seconds per SFT epoch on one core.
TINY = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "tokenizer_corpus": "sft_data"}
LIMITS = {"max_tool_calls": 2, "max_turns": 3, "max_new_tokens_per_turn": 40, "max_total_new_tokens": 80}
ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
REWARD_COMPONENTS = [{"name": "artist", "params": ARTIST_PARAMS}]

_COMMON: dict[str, Any] = {
    "model": {"path": "tiny", "tiny": TINY},
    "template": {"name": "qwen_tool"},
    "tools": [{"name": "calculator"}],
    "limits": LIMITS,
    "rollout": {"prompts_per_step": 8, "samples_per_prompt": 8},
    "reward": {"components": REWARD_COMPONENTS},
    "algorithm": {"estimator": "grpo"},
    "loss": {"kl": "none", "kl_coef": 0.0},
    # 400 conversations, 16 per step: 100 SFT steps, as the short demo's policy
    "sft": {"epochs": 4, "lr": 3e-3, "batch_size": 16},
    "evaluation": {"greedy": False},
}

LEARNING_RUN: dict[str, Any] = {
    **_COMMON,
    "sampling": {"temperature": 1.0},
    "optimizer": {"lr": 1e-3, "warmup_steps": 2},
    "training": {"steps": 30},
    "checkpoint": {"every_steps": 10},
}

COLLAPSE_RUN: dict[str, Any] = {
    **_COMMON,
    "sampling": {"temperature": 0.5},
    "optimizer": {"lr": 1e-2, "warmup_steps": 40},  # the rate at step k is k * 2.5e-4
    "training": {"steps": 30},
    "checkpoint": {"every_steps": 10},
}


def expert_conversations(n: int = 400, *, seed: int = 5, tool_fraction: float = 0.5) -> list[dict[str, Any]]:
    """`n` expert conversations on arithmetic problems (`messages`, `answer`), a `tool_fraction` of
    which call the calculator and copy its result; the others answer directly."""
    problems, _ = make_splits(n, 0, seed=seed)
    return [
        {"messages": record["messages"], "answer": record["answer"]}
        for record in make_experts(problems, tool_fraction=tool_fraction, seed=0)
    ]
