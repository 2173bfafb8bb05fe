"""What the workbench's demo needs from the calculator demo: its expert conversations (an SFT dataset
of the demo catalog), its agent program (the calculator as an OpenAI-client tool loop) and the configs
of its two demo runs as `RunConfig`s.

Both runs build the tiny model in their run directory (its tokenizer trained on the SFT conversations)
and warm-start it with SFT on the calculator demo's experts (60% call the calculator and copy its
result, the others answer directly), then train GRPO on ARTIST's answer and tool-execution reward:

- the learning run: the calculator demo's recipe (`python -m trainers demo`), cut to fit a make-run
  core: its SFT curriculum (the tool-using experts alone, then the whole mix, at lr 1e-3), then RL at
  lr 1e-4 with a k3 KL of 0.05. Answer accuracy, tool calls and reward rise, no echo-trap alert.
- the collapse run: the short recipe of `tests/trainers/training/test_echo_trap_runs.py` (a 2-layer
  model, 100 SFT steps at lr 3e-3, temperature 0.5) and a learning rate that climbs 2.5e-4 per step
  until the policy falls apart, which raises an alert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainers.demo.arithmetic import make_splits
from trainers.demo.experts import make_experts

LIMITS = {"max_tool_calls": 2, "max_turns": 3, "max_new_tokens_per_turn": 40, "max_total_new_tokens": 80}
ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
REWARD_COMPONENTS = [{"name": "artist", "params": ARTIST_PARAMS}]
EXPERTS = 1000  # 600 tool-using conversations: 500 steps of 16 see each about 13 times, not 33 (of 240)
TOOL_FRACTION = 0.6  # the calculator demo's mix
AGENT_PROGRAM = Path(__file__).parent / "agents" / "calculator.py"

# The calculator demo's model has 4 layers of 128 (0.4 s per SFT step on one core: its 1100-step curriculum
# alone takes 7 minutes). Copying the calculator's digits into the answer needs a layer that finds the
# tool response and one that copies: 2 layers of 64 never formed it in 400 tool-only steps (SFT loss flat
# at 0.8, answer accuracy 0 through RL); 3 layers of 64 formed it near step 380 (loss 0.7 -> 0.3) at
# 0.13 s per step, and RL then took answer accuracy from 0.3 to 0.55.
LEARNING_TINY = {
    "hidden_size": 64,
    "num_layers": 3,
    "num_heads": 2,
    "num_kv_heads": 1,
    "tokenizer_corpus": "sft_data",
}
COLLAPSE_TINY = {**LEARNING_TINY, "num_layers": 2}

_COMMON: dict[str, Any] = {
    "template": {"name": "qwen_tool"},
    "tools": [{"name": "calculator"}],
    "limits": LIMITS,
    "rollout": {"prompts_per_step": 8, "samples_per_prompt": 8},
    "reward": {"components": REWARD_COMPONENTS},
    "algorithm": {"estimator": "grpo"},
    "training": {"steps": 30},
    "checkpoint": {"every_steps": 10},
}

LEARNING_RUN: dict[str, Any] = {
    **_COMMON,
    "model": {"path": "tiny", "tiny": LEARNING_TINY},
    # The demo's curriculum: tool-only until copying has formed (abruptly; 500 steps leave a margin over
    # the ~380 we measured), then the whole mix, which sets how often the policy calls the calculator.
    # Above lr 1e-3 the copying heads never formed in the demo's runs.
    "sft": {
        "phases": [{"only_tool_calls": True, "steps": 500}, {"steps": 200}],
        "lr": 1e-3,
        "batch_size": 16,
    },
    "sampling": {"temperature": 1.0},
    # The demo's RL: 1e-4 with a small KL keeps the copying SFT formed (3e-4 without KL eroded it).
    "optimizer": {"lr": 1e-4, "warmup_steps": 2},
    "loss": {"kl": "k3", "kl_coef": 0.05},
    "evaluation": {"every_steps": 10, "at_start": True, "greedy": False},
}

COLLAPSE_RUN: dict[str, Any] = {
    **_COMMON,
    "model": {"path": "tiny", "tiny": COLLAPSE_TINY},
    "sft": {"phases": [{"steps": 100}], "lr": 3e-3, "batch_size": 16},  # the short demo's warm start
    "sampling": {"temperature": 0.5},
    "optimizer": {"lr": 1e-2, "warmup_steps": 40},  # the rate at step k is k * 2.5e-4
    "loss": {"kl": "none", "kl_coef": 0.0},
    "evaluation": {"greedy": False},
}


def expert_conversations(
    n: int = EXPERTS, *, seed: int = 5, tool_fraction: float = TOOL_FRACTION
) -> list[dict[str, Any]]:
    """`n` expert conversations on arithmetic problems (`messages`, `answer`), a `tool_fraction` of
    which call the calculator and copy its result; the others answer directly."""
    problems, _ = make_splits(n, 0, seed=seed)
    return [
        {"messages": record["messages"], "answer": record["answer"]}
        for record in make_experts(problems, tool_fraction=tool_fraction, seed=0)
    ]


def agent_program_source() -> str:
    """The calculator agent program's text (docs/agents.md): the demo catalog's agent program."""
    return AGENT_PROGRAM.read_text(encoding="utf-8")
