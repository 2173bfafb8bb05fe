"""Where a model is and where it goes: the one answer for every part that moves inputs or weights."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import nn


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters are (ZeRO-3's partitioned parameters too): its inputs go there."""
    return next(model.parameters()).device


def resolve_device(device: str) -> str:
    """A config's `model.device` made concrete: "auto" is cuda where a GPU is visible, else cpu."""
    if device != "auto":
        return device
    import torch  # here: the config and the web process import this package without torch

    return "cuda" if torch.cuda.is_available() else "cpu"
