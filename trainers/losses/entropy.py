"""Policy entropy from logits, per token: H = logsumexp(z) - sum softmax(z) * z."""

from __future__ import annotations

import torch


def entropy_from_logits(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """[B, T, V] logits -> [B, T] entropies; zero (with zero gradient) where mask == 0."""
    if mask is not None:
        logits = torch.where(mask[..., None] > 0, logits, 0.0)  # masked rows never reach the softmax
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return entropy if mask is None else entropy * (mask > 0)
