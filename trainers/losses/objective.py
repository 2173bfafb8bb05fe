"""The whole policy loss of one (micro-)batch: clipped surrogate + beta * KL to the reference - entropy bonus.

Every term uses the same aggregation over policy tokens (as verl does), so masked tokens never count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainers.losses.aggregate import Aggregation, aggregate, masked_mean, scalar
from trainers.losses.entropy import entropy_from_logits
from trainers.losses.kl import KLKind, kl_penalty
from trainers.losses.policy import MAX_LOG_RATIO, LossOutput, clipped_surrogate
from trainers.metrics import keys


@dataclass(frozen=True)
class PolicyLossConfig:
    eps_low: float = 0.2  # lower clip: ratio floor 1 - eps_low
    eps_high: float = 0.2  # upper clip: ratio ceiling 1 + eps_high (DAPO clip-higher: 0.28)
    dual_clip: float | None = None  # c > 1 bounds the loss of negative-advantage tokens at -c * A
    agg: Aggregation = "token_mean"  # token_mean | seq_mean_token_mean | seq_mean_token_sum
    norm_constant: float | None = None  # seq_mean_token_sum divisor: the generation budget (None: width T)
    kl_kind: KLKind = "none"  # KL to the frozen reference: k1 | k2 | k3 | none
    kl_coef: float = 0.0  # beta (ToRL and DAPO: 0)
    entropy_coef: float = 0.0  # weight of the entropy bonus (subtracted from the loss)
    tis_cap: float | None = None  # truncated IS: token weights min(exp(old_logp - sampler_logp), cap)


def policy_objective(
    config: PolicyLossConfig,
    *,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    ref_logp: torch.Tensor | None = None,
    logits: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    token_count: float | None = None,
    seq_count: float | None = None,
    sampler_logp: torch.Tensor | None = None,
) -> LossOutput:
    """All [B, T] on response tokens; entropy from per-token `entropy` or from `logits` [B, T, V].

    With `config.tis_cap` and the sampler's log-probs `sampler_logp`, each token's surrogate is weighted
    by min(exp(old_logp - sampler_logp), tis_cap): truncated importance sampling between the policy
    that sampled (vLLM) and the trainer's old policy (Yao et al. 2025, "Your efficient RL framework
    secretly brings you off-policy RL training")."""
    agg_kwargs = {"token_count": token_count, "seq_count": seq_count, "norm_constant": config.norm_constant}
    is_weights = None
    if config.tis_cap is not None and sampler_logp is not None:
        log_w = (old_logp.detach() - sampler_logp).clamp(max=MAX_LOG_RATIO)
        is_weights = torch.exp(log_w).clamp(max=config.tis_cap)
    out = clipped_surrogate(
        logp,
        old_logp,
        advantages,
        mask,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        dual_clip=config.dual_clip,
        agg=config.agg,
        is_weights=is_weights,
        **agg_kwargs,
    )
    loss, stats = out.loss, dict(out.stats)
    if is_weights is not None:
        stats[keys.LOSS_TIS_WEIGHT] = scalar(masked_mean(is_weights, mask))
    if config.kl_kind != "none" and (config.kl_coef or ref_logp is not None):
        if ref_logp is None:
            raise ValueError("a KL term needs ref_logp, the frozen reference policy's log-probs")
        kl = kl_penalty(logp, ref_logp, config.kl_kind, mask)
        loss = loss + config.kl_coef * aggregate(kl, mask, config.agg, **agg_kwargs)
        stats[keys.LOSS_KL] = scalar(masked_mean(kl.detach(), mask))
    if entropy is None and logits is not None:
        entropy = entropy_from_logits(logits, mask)
    if entropy is not None:
        entropy = torch.where(mask > 0, entropy, 0.0)
        if config.entropy_coef:
            loss = loss - config.entropy_coef * aggregate(entropy, mask, config.agg, **agg_kwargs)
        stats[keys.LOSS_ENTROPY] = scalar(masked_mean(entropy.detach(), mask))
    elif config.entropy_coef:
        raise ValueError("an entropy bonus needs the logits or the per-token entropy")
    stats[keys.LOSS_TOTAL] = scalar(loss.detach())
    return LossOutput(loss, stats)
