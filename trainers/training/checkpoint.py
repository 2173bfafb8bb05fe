"""Checkpoints that resume exactly: model (safetensors), optimiser, scheduler, every RNG state and the step.

Layout of `step_000010/`: the model and tokenizer as `save_pretrained` writes them (so a checkpoint
loads with `from_pretrained`), `value_head.safetensors` for PPO, and `trainer_state.pt` with the rest.
A LoRA run's model is its adapter as PEFT saves it (`adapter_model.safetensors`, and
`adapter_config.json` naming the base model's directory): the frozen base weights are not copied.

`trainer_state.pt` holds only plain data (tensors, numbers, strings, None, and lists, tuples and dicts
of them): every stateful component saves a `state_dict()` of that kind, saving refuses anything else,
and loading uses `torch.load(weights_only=True)`, which cannot run code. A checkpoint path comes from
a run's record, so a file someone placed there must not be able to execute anything when resumed.
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from trainers.models.lora import is_peft, load_adapter_weights

STATE_FILE = "trainer_state.pt"
VALUE_HEAD_FILE = "value_head.safetensors"


PLAIN_SCALARS = (str, int, float, bool, type(None))  # exactly these: a NumPy float is a float subclass


def check_plain(value: Any, where: str = "state") -> None:
    """Raise TypeError unless `value` is plain data that `torch.load(weights_only=True)` reads back."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_plain(key, f"{where} key")
            check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
    elif type(value) not in PLAIN_SCALARS and not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{where} is a {type(value).__qualname__}: checkpoint state holds only tensors, numbers, strings,"
            " None, lists, tuples and dicts (give the component a state_dict of those)"
        )


def python_rng_state(rng: random.Random | None = None) -> dict[str, Any]:
    """A `random.Random` state (the global one by default) as plain data."""
    version, internal, gauss_next = (rng or random).getstate()
    return {"version": version, "internal": list(internal), "gauss_next": gauss_next}


def set_python_rng_state(state: dict[str, Any], rng: random.Random | None = None) -> None:
    (rng or random).setstate((state["version"], tuple(state["internal"]), state["gauss_next"]))


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch generator states (CUDA too when present), as plain data."""
    numpy = np.random.get_state(legacy=False)
    numpy["state"] = {**numpy["state"], "key": numpy["state"]["key"].tolist()}
    state = {"python": python_rng_state(), "numpy": numpy, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    set_python_rng_state(state["python"])
    numpy = state["numpy"]
    key = np.asarray(numpy["state"]["key"], dtype=np.uint32)
    np.random.set_state({**numpy, "state": {**numpy["state"], "key": key}})
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
    optimizer_state: dict[str, Any] | None = None,
) -> Path:
    """Write everything needed to continue at `step`; trainer_state.pt last, so it marks completion.

    `optimizer_state`: the plain `state_dict()` to save in place of `optimizer`'s (a data-parallel
    engine consolidates its ranks' partitions into the single process's form)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    if value_head is not None:
        save_file({k: v.contiguous() for k, v in value_head.state_dict().items()}, path / VALUE_HEAD_FILE)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer is not None else optimizer_state,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_state(),
        "extra": extra or {},
    }
    check_plain(state, "trainer state")
    torch.save(state, path / STATE_FILE)
    return path


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """A checkpoint's weights by name: `model.safetensors`, or every shard its index lists
    (`save_pretrained` shards a model larger than its shard size, an 8B model in fp32 among them)."""
    path = Path(path)
    index = path / "model.safetensors.index.json"
    if not index.exists():
        return load_file(path / "model.safetensors")
    weights: dict[str, torch.Tensor] = {}
    for shard in sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())):
        weights.update(load_file(path / shard))
    return weights


def load_model_weights(
    model: nn.Module, path: str | Path, weights: dict[str, torch.Tensor] | None = None
) -> None:
    """Load the checkpoint's weights in place (`weights`: already read from it); only weights tied to
    others may be absent from it. A LoRA policy (a PEFT model) loads the checkpoint's adapter alone: its
    base weights are frozen, loaded from the base model."""
    if is_peft(model):
        load_adapter_weights(model, path)
        return
    weights = read_weights(path) if weights is None else weights
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise ValueError(
            f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}"
        )
    if tied:
        model.tie_weights()


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    """`trainer_state.pt` of a checkpoint, read with `weights_only=True`: a file holding anything but plain
    data (a pickled object, which could run code when loaded) is refused with a ValueError."""
    file = Path(path) / STATE_FILE
    try:
        return torch.load(file, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"{file} holds more than tensors and plain data: not loaded ({exc})") from exc


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
    state = load_trainer_state(path)
    if optimizer is not None and state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state["scheduler"] is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        set_rng_state(state["rng"])
    return Resumed(step=state["step"], extra=state["extra"])
