"""The demo's knobs, importable without torch so the CLI starts fast, and their checks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class SettingsError(ValueError):
    """Demo settings that cannot run, all named at once; raised before any work (SFT takes minutes)."""


def refuse(kind: str, problems: list[str]) -> None:
    """Raise SettingsError listing `problems`, if there are any."""
    if problems:
        raise SettingsError(f"invalid {kind} settings: " + "; ".join(problems))


def below(values: Mapping[str, Any], names: Iterable[str], low: int) -> list[str]:
    """A problem for each of `names` whose value is under `low`."""
    return [f"{name} must be at least {low}, not {values[name]}" for name in names if values[name] < low]


def not_positive(values: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """A problem for each of `names` that is not a positive number (NaN included)."""
    return [f"{name} must be positive, not {values[name]}" for name in names if not values[name] > 0]


def not_shares(values: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """A problem for each of `names` that is not a share from 0 to 1."""
    return [f"{name} must be between 0 and 1, not {values[name]}" for name in names
            if not 0 <= values[name] <= 1]  # fmt: skip


def shared_problems(values: Mapping[str, Any]) -> list[str]:
    """The checks of `threads` (None: torch's default) and `kl_coef`, which both recipes have."""
    found = []
    if values["threads"] is not None and values["threads"] < 1:
        found.append(f"threads must be at least 1, not {values['threads']}")
    if not 0 <= values["kl_coef"] < math.inf:
        found.append(f"kl_coef must be a finite number from 0 up, not {values['kl_coef']}")
    return found


@dataclass
class DemoSettings:
    """The calculator demo's recipe; why each default is what it is: docs/experiments/calculator.md."""

    seed: int = 0
    n_train: int = 3000  # problems (one expert conversation each) and RL prompts
    n_eval: int = 200  # held-out problems for the before/after table
    n_val: int = 64  # problems for choosing the best RL checkpoint (never the held-out ones)
    tool_fraction: float = 0.6  # share of experts that call the calculator
    num_layers: int = 4
    # SFT curriculum: the tool-using experts alone first, until copying digits has formed, then the whole
    # mix, which sets how often the SFT policy calls the tool.
    sft_tool_steps: int = 500
    sft_steps: int = 600
    sft_seconds: float | None = None  # optional wall-time cap on each SFT phase
    sft_lr: float = 1e-3
    sft_batch: int = 16
    rl_steps: int = 40
    rl_lr: float = 1e-4
    prompts_per_step: int = 8
    samples_per_prompt: int = 8
    kl_coef: float = 0.05
    eval_every: int = 5  # RL steps between validation evaluations (best checkpoint); 0 = none
    eval_samples: int = 1  # samples per held-out problem at temperature 1
    threads: int | None = None

    def __post_init__(self) -> None:
        v = vars(self)
        found = below(v, ("n_train", "n_eval", "n_val", "num_layers", "sft_batch", "rl_steps",
                          "prompts_per_step", "eval_samples"), 1)  # fmt: skip
        found += below(v, ("sft_tool_steps", "sft_steps", "eval_every"), 0)
        found += below(v, ("samples_per_prompt",), 2)  # a problem's samples are compared
        found += not_shares(v, ("tool_fraction",)) + not_positive(v, ("sft_lr", "rl_lr"))
        if self.sft_seconds is not None:
            found += not_positive(v, ("sft_seconds",))
        refuse("demo", found + shared_problems(v))
