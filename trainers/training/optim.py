"""The optimiser every training stage uses."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def adamw(params: Iterable[torch.nn.Parameter], **kwargs: object) -> torch.optim.AdamW:
    """AdamW with the fused kernel: one call per step instead of a dozen small ops per tensor
    (on the tiny policy's 50 tensors on 2 CPU threads: 1.4 ms against 17 ms)."""
    return torch.optim.AdamW(params, fused=True, **kwargs)
