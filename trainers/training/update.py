"""The PPO-style update of one step: epochs over shuffled minibatches, gradient accumulation inside each.

Every micro-batch loss is normalised by its whole minibatch's token/sequence counts, so the
accumulated gradient equals the gradient of the minibatch loss (verl's convention).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import nn

from trainers.losses.objective import PolicyLossConfig, policy_objective
from trainers.losses.value import clipped_value_loss
from trainers.metrics import keys
from trainers.training.policy import PolicyOutput, TokenBatch, ValueHead, forward_policy


@dataclass(frozen=True)
class UpdateSettings:
    ppo_epochs: int = 1  # passes over the step's batch
    minibatch_size: int | None = None  # trajectories per optimiser step; None = the whole batch
    grad_accumulation: int = 1  # micro-batches per minibatch
    grad_clip: float | None = 1.0  # max global grad norm
    value_coef: float = 0.5  # PPO: weight of the value loss
    value_clip: float | None = 0.2  # PPO: clip range of the value loss
    temperature: float = 1.0  # logprobs under the tempered distribution the rollout sampled from

    def minibatches(self, size: int) -> int:
        return max(1, -(-size // (self.minibatch_size or size)))

    def reuses_samples(self, size: int) -> bool:
        """True when some optimiser step sees data sampled before an earlier step changed the policy."""
        return self.ppo_epochs > 1 or self.minibatches(size) > 1


@dataclass
class UpdateInputs:
    """The step's batch and everything computed before the update ([B, T] tensors)."""

    batch: TokenBatch
    advantages: torch.Tensor
    old: PolicyOutput | None = None  # behaviour logprobs (and values); None = on-policy, use detached
    ref_logprobs: torch.Tensor | None = None
    returns: torch.Tensor | None = None


def _rows(t: torch.Tensor | None, idx: torch.Tensor, width: int) -> torch.Tensor | None:
    return None if t is None else t[idx, :width]


def _micro_loss(
    model: nn.Module,
    inputs: UpdateInputs,
    idx: torch.Tensor,
    *,
    loss_config: PolicyLossConfig,
    settings: UpdateSettings,
    value_head: ValueHead | None,
    counts: dict[str, float],
) -> tuple[torch.Tensor, dict[str, float]]:
    micro = inputs.batch.select(idx)
    width = micro.response_ids.shape[1]
    out = forward_policy(
        model, micro, temperature=settings.temperature, value_head=value_head,
        entropy_grad=loss_config.entropy_coef != 0,
    )  # fmt: skip
    old_logp = _rows(inputs.old.logprobs, idx, width) if inputs.old is not None else out.logprobs.detach()
    result = policy_objective(
        loss_config,
        logp=out.logprobs,
        old_logp=old_logp,
        advantages=inputs.advantages[idx, :width],
        mask=micro.response_mask,
        ref_logp=_rows(inputs.ref_logprobs, idx, width),
        entropy=out.entropy,
        **counts,
    )
    loss, stats = result.loss, dict(result.stats)
    if value_head is not None and out.values is not None and inputs.returns is not None:
        old_values = _rows(inputs.old.values, idx, width) if inputs.old is not None else out.values.detach()
        value = clipped_value_loss(
            out.values,
            old_values,
            inputs.returns[idx, :width],
            micro.response_mask,
            clip_range=settings.value_clip,
            agg=loss_config.agg,
            **counts,
            norm_constant=loss_config.norm_constant,
        )
        loss = loss + settings.value_coef * value.loss
        stats.update(value.stats)
    return loss, stats


def ppo_update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: UpdateInputs,
    *,
    loss_config: PolicyLossConfig,
    settings: UpdateSettings,
    value_head: ValueHead | None = None,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Run the epochs; returns the loss statistics averaged over micro-batches, and the mean grad norm."""
    size = inputs.batch.size
    # seq_mean_token_sum: one constant for every micro-batch. A run built from a config passes its
    # generation budget (Dr. GRPO's constant); this fallback, the step's width, varies between steps.
    if loss_config.norm_constant is None:
        loss_config = dataclasses.replace(
            loss_config, norm_constant=float(inputs.batch.response_ids.shape[1])
        )
    params = [p for p in model.parameters() if p.requires_grad]
    if value_head is not None:
        params += list(value_head.parameters())
    totals: dict[str, float] = defaultdict(float)
    micro_count, norms = 0, []
    model.train()
    for _ in range(settings.ppo_epochs):
        order = torch.randperm(size, generator=generator)
        for mb in order.split(settings.minibatch_size or size):
            mask = inputs.batch.response_mask[mb]
            counts = {
                "token_count": float(mask.sum().clamp(min=1)),
                "seq_count": float((mask.sum(1) > 0).sum().clamp(min=1)),
            }
            for micro in mb.tensor_split(min(settings.grad_accumulation, len(mb))):
                loss, stats = _micro_loss(
                    model, inputs, micro, loss_config=loss_config, settings=settings,
                    value_head=value_head, counts=counts,
                )  # fmt: skip
                loss.backward()
                for key, value in stats.items():
                    totals[key] += value
                micro_count += 1
            clip = settings.grad_clip if settings.grad_clip is not None else float("inf")
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    model.eval()
    out = {key: value / max(1, micro_count) for key, value in totals.items()}
    # token_mean losses of micro-batches add up to the minibatch loss; report that sum per minibatch
    for key in (keys.LOSS_POLICY, keys.LOSS_TOTAL, keys.LOSS_VALUE):
        if key in out:
            out[key] *= micro_count / max(1, len(norms))
    out[keys.LOSS_GRAD_NORM] = sum(norms) / len(norms)
    return out
