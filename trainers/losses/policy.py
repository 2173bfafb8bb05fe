"""The clipped surrogate (PPO, arXiv 1707.06347 eq. 7) with decoupled clip ranges (DAPO clip-higher,
arXiv 2503.14476 eq. 10) and optional dual clip for negative advantages (arXiv 1912.09729 eq. 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from trainers.losses.aggregate import Aggregation, aggregate, masked_mean, scalar
from trainers.metrics import keys

MAX_LOG_RATIO = 20.0  # exp(20) is already far outside any clip range; avoids inf ratios


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar, differentiable
    stats: dict[str, float] = field(default_factory=dict)  # detached, keyed by trainers.metrics.keys


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
    agg: Aggregation = "token_mean",
    is_weights: torch.Tensor | None = None,
    **agg_kwargs: Any,
) -> LossOutput:
    """-min(rho A, clip(rho, 1-eps_low, 1+eps_high) A), and for A < 0 at most -c A (dual clip).

    `is_weights` [B, T] (constants, e.g. truncated importance sampling's min(pi_old / pi_sampler, C))
    multiply each token's clipped loss."""
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    keep = mask > 0
    log_ratio = torch.where(keep, logp - old_logp, 0.0).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    adv = torch.where(keep, advantages, 0.0)
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    per_token = torch.maximum(unclipped, clipped)
    dual_active = torch.zeros_like(keep)
    if dual_clip is not None:
        dual_active = (adv < 0) & (per_token > -adv * dual_clip)
        per_token = torch.where(dual_active, -adv * dual_clip, per_token)
    if is_weights is not None:
        per_token = per_token * torch.where(keep, is_weights.detach(), 0.0)
    loss = aggregate(per_token, mask, agg, **agg_kwargs)
    with torch.no_grad():
        # low clip binds only when A < 0 (the min picks the clipped term), high clip only when A > 0
        low = (ratio < 1.0 - eps_low) & (adv < 0)
        high = (ratio > 1.0 + eps_high) & (adv > 0)
        stats = {
            keys.LOSS_POLICY: scalar(loss.detach()),
            keys.LOSS_CLIPFRAC_LOW: scalar(masked_mean(low.float(), mask)),
            keys.LOSS_CLIPFRAC_HIGH: scalar(masked_mean(high.float(), mask)),
            keys.LOSS_CLIPFRAC_DUAL: scalar(masked_mean(dual_active.float(), mask)),
            keys.LOSS_APPROX_KL: scalar(masked_mean((ratio - 1.0) - log_ratio, mask)),  # k3, Schulman 2020
        }
    return LossOutput(loss, stats)
