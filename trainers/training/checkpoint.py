"""Checkpoints that resume exactly: model (safetensors), optimiser, scheduler, every RNG state and the step.

Layout of `step_000010/`: the model and tokenizer as `save_pretrained` writes them (so a checkpoint
loads with `from_pretrained`), `value_head.safetensors` for PPO, and `trainer_state.pt` with the rest.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

STATE_FILE = "trainer_state.pt"
VALUE_HEAD_FILE = "value_head.safetensors"


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch generator states (CUDA too when present)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@dataclass
class Resumed:
    """What a loaded checkpoint hands back to the loop besides the restored objects."""

    step: int
    extra: dict[str, Any] = field(default_factory=dict)


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:06d}"


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint with the highest step that was completely written, or None."""
    root = Path(run_dir) / "checkpoints"
    done = [p for p in root.glob("step_*") if (p / STATE_FILE).exists()]
    return max(done, key=lambda p: int(p.name.split("_")[1])) if done else None


def save_checkpoint(
    path: str | Path,
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    tokenizer: Any = None,
    value_head: nn.Module | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write everything needed to continue at `step`; trainer_state.pt last, so it marks completion."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    if value_head is not None:
        save_file({k: v.contiguous() for k, v in value_head.state_dict().items()}, path / VALUE_HEAD_FILE)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_state(),
        "extra": extra or {},
    }
    torch.save(state, path / STATE_FILE)
    return path


def load_model_weights(model: nn.Module, path: str | Path) -> None:
    """Load `model.safetensors` in place; only weights tied to others may be absent from the file."""
    weights = load_file(Path(path) / "model.safetensors")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise ValueError(
            f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}"
        )
    if tied:
        model.tie_weights()


def load_checkpoint(
    path: str | Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    value_head: nn.Module | None = None,
    restore_rng: bool = True,
) -> Resumed:
    """Restore the objects in place (and the RNGs); returns the step to continue after and extra state."""
    path = Path(path)
    load_model_weights(model, path)
    if value_head is not None:
        value_head.load_state_dict(load_file(path / VALUE_HEAD_FILE))
    state = torch.load(path / STATE_FILE, weights_only=False)  # our own file: RNG states are not tensors
    if optimizer is not None and state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state["scheduler"] is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        set_rng_state(state["rng"])
    return Resumed(step=state["step"], extra=state["extra"])
