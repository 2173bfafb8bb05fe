"""Reducing a per-token loss matrix [B, T] to a scalar, over policy tokens (mask == 1) only.

token_mean (DAPO, arXiv 2503.14476 eq. 10): sum over all policy tokens of the batch / their count.
seq_mean_token_mean (GRPO, arXiv 2402.03300 eq. 3): mean over sequences of each sequence's token mean.
seq_mean_token_sum (Dr. GRPO, arXiv 2503.20783): mean over sequences of each sequence's token sum,
divided by a constant (the paper's code uses the generation budget; default: the padded width T),
so a response's weight does not depend on its length.
With gradient accumulation pass the whole batch's `token_count` / `seq_count`, so that the
micro-batch losses add up to the full-batch loss.
"""

from __future__ import annotations

from typing import Literal

import torch

Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"]
AGGREGATIONS: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum")


def scalar(value: torch.Tensor) -> float:
    """A statistic's value; NaN on the `meta` device (shapes only: a dry run checking device placement)."""
    return float("nan") if value.is_meta else float(value)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over mask == 1 positions; masked values (even inf/nan) never leak in."""
    keep = mask > 0
    return torch.where(keep, values, 0.0).sum() / keep.sum().clamp(min=1)


def aggregate(
    losses: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "token_mean",
    *,
    token_count: float | None = None,
    seq_count: float | None = None,
    norm_constant: float | None = None,
) -> torch.Tensor:
    keep = mask > 0
    masked = torch.where(keep, losses, 0.0)
    if mode == "token_mean":
        count = keep.sum().clamp(min=1) if token_count is None else token_count
        return masked.sum() / count
    # sequences without any policy token (all tool output or padding) are not counted
    sequences = (keep.sum(dim=-1) > 0).sum().clamp(min=1) if seq_count is None else seq_count
    if mode == "seq_mean_token_mean":
        return (masked.sum(dim=-1) / keep.sum(dim=-1).clamp(min=1)).sum() / sequences
    if mode == "seq_mean_token_sum":
        constant = losses.shape[-1] if norm_constant is None else norm_constant
        return masked.sum() / sequences / constant
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")
