"""Clipped value loss for PPO's critic (as in OpenAI baselines ppo2 / CleanRL):
0.5 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2).
"""

from __future__ import annotations

from typing import Any

import torch

from trainers.losses.aggregate import Aggregation, aggregate, masked_mean, scalar
from trainers.losses.policy import LossOutput
from trainers.metrics import keys


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_range: float | None = 0.2,
    agg: Aggregation = "token_mean",
    **agg_kwargs: Any,
) -> LossOutput:
    keep = mask > 0
    v = torch.where(keep, values, 0.0)
    v_old = torch.where(keep, old_values, 0.0)
    target = torch.where(keep, returns, 0.0)
    unclipped = (v - target).square()
    if clip_range is None:
        per_token, clipped_more = 0.5 * unclipped, torch.zeros_like(keep)
    else:
        clipped = (v_old + (v - v_old).clamp(-clip_range, clip_range) - target).square()
        per_token, clipped_more = 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped
    loss = aggregate(per_token, mask, agg, **agg_kwargs)
    stats = {
        keys.LOSS_VALUE: scalar(loss.detach()),
        keys.LOSS_VALUE_CLIPFRAC: scalar(masked_mean(clipped_more.float(), mask)),
    }
    return LossOutput(loss, stats)
