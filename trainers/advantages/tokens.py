"""Token-level recurrences that run over policy tokens only (PPO GAE, REINFORCE++ returns).

Tool output and glue tokens are not actions: the recurrence skips them, so the policy tokens of a
row are treated as consecutive time steps (values and rewards bridge masked spans, as verl does
for observation tokens). A reward that sits on a masked position (e.g. the outcome placed on a
trailing glue token) is credited to the last policy token before it, the action that caused it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainers.advantages.base import AdvantageBatch

if TYPE_CHECKING:
    import torch


def _policy_first_order(mask: torch.Tensor) -> torch.Tensor:
    """Per row, a column order that lists policy positions first (in sequence order)."""
    return (mask <= 0).byte().argsort(dim=1, stable=True)


def compress(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-align the policy positions of each row: returns (values [B, T], validity [B, T])."""
    order = _policy_first_order(mask)
    return x.gather(1, order), mask.gather(1, order)


def expand(compact: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Inverse of `compress`: put left-aligned values back on their policy positions, zero elsewhere."""
    order = _policy_first_order(mask)
    valid = mask.gather(1, order)
    return compact.new_zeros(compact.shape).scatter(1, order, compact * valid)


def credit_to_policy_tokens(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Move rewards on masked positions onto the preceding policy token (the first one if none precedes)."""
    owner_rank = (mask.cumsum(dim=1) - 1).clamp(min=0).long()  # rank of the last policy token so far
    compact = rewards.new_zeros(rewards.shape).scatter_add(1, owner_rank, rewards)
    return expand(compact, mask)


def token_level_rewards(batch: AdvantageBatch, kl_coef: float) -> torch.Tensor:
    """Rewards on policy tokens (given, else the outcome on the last policy token) minus kl_coef * KL."""
    mask = batch.response_mask
    if batch.token_rewards is not None:
        rewards = batch.token_rewards.float().clone()
    else:
        rewards = mask.new_zeros(mask.shape)
        last = mask.cumsum(dim=1).argmax(dim=1)  # the count of policy tokens first peaks at the last one
        has_policy = mask.sum(dim=1) > 0
        rewards[has_policy, last[has_policy]] = batch.rewards[has_policy]
    rewards = credit_to_policy_tokens(rewards, mask)
    if kl_coef:
        if batch.kl is None:
            raise ValueError("kl_coef > 0 needs batch.kl, the per-token KL to the reference policy")
        rewards = rewards - kl_coef * batch.kl.float() * mask
    return rewards


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE (Schulman et al., arXiv 1506.02438, eq. 16) over policy tokens; V after the last one is 0.

    Returns (advantages, returns = advantages + values), both zero off-policy.
    """
    r, valid = compress(rewards, mask)
    v, _ = compress(values.float(), mask)
    v = v * valid
    advantages = r.new_zeros(r.shape)
    running = r.new_zeros(r.shape[0])
    for t in reversed(range(r.shape[1])):
        next_value = v[:, t + 1] if t + 1 < r.shape[1] else running.new_zeros(running.shape)
        delta = r[:, t] + gamma * next_value - v[:, t]
        running = (delta + gamma * lam * running) * valid[:, t]
        advantages[:, t] = running
    return expand(advantages, mask), expand(advantages + v, mask)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over all policy tokens of the batch (population std); zero off-policy."""
    count = mask.sum().clamp(min=1)
    mean = (x * mask).sum() / count
    var = (((x - mean) * mask) ** 2).sum() / count
    return (x - mean) * var.clamp(min=eps).rsqrt() * mask
