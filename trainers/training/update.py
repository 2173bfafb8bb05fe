"""The PPO-style update of one step: epochs over shuffled minibatches, gradient accumulation inside each.

Every micro-batch loss is normalised by its whole minibatch's token/sequence counts, so the
accumulated gradient equals the gradient of the minibatch loss (verl's convention).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from trainers.losses.objective import PolicyLossConfig, policy_objective
from trainers.losses.value import clipped_value_loss
from trainers.metrics import keys
from trainers.models.device import model_device
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
    old_logprobs: str = "trainer"  # the ratio's old policy: trainer (recomputed) | sampler (the rollout's)
    measure_mismatch: bool = False  # recompute the trainer's log-probs to report the sampler mismatch

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
    sampler_logprobs: torch.Tensor | None = None  # the rollout's own log-probs (truncated IS)


def _rows(t: torch.Tensor | None, idx: torch.Tensor, width: int, device: torch.device) -> torch.Tensor | None:
    """The micro-batch's rows of a [B, T] input, on the device of the model's outputs."""
    return None if t is None else t[idx.to(t.device), :width].to(device)


def _micro_loss(
    model: nn.Module,
    inputs: UpdateInputs,
    idx: torch.Tensor,
    *,
    loss_config: PolicyLossConfig,
    settings: UpdateSettings,
    value_head: ValueHead | None,
    counts: dict[str, float],
    share_prompts: bool = True,
    share_prefix: bool = True,
) -> tuple[torch.Tensor, dict[str, float]]:
    micro = inputs.batch.select(idx)
    width = micro.response_ids.shape[1]
    out = forward_policy(
        model, micro, temperature=settings.temperature, value_head=value_head,
        entropy_grad=loss_config.entropy_coef != 0, share_prompts=share_prompts, share_prefix=share_prefix,
    )  # fmt: skip
    device = out.logprobs.device  # the micro-batch was collated on the CPU; the model may be elsewhere
    mask = micro.response_mask.to(device)
    old_logp = (
        _rows(inputs.old.logprobs, idx, width, device) if inputs.old is not None else out.logprobs.detach()
    )
    result = policy_objective(
        loss_config,
        logp=out.logprobs,
        old_logp=old_logp,
        advantages=_rows(inputs.advantages, idx, width, device),
        mask=mask,
        ref_logp=_rows(inputs.ref_logprobs, idx, width, device),
        entropy=out.entropy,
        sampler_logp=_rows(inputs.sampler_logprobs, idx, width, device),
        **counts,
    )
    loss, stats = result.loss, dict(result.stats)
    if value_head is not None and out.values is not None and inputs.returns is not None:
        old_values = (
            _rows(inputs.old.values, idx, width, device) if inputs.old is not None else out.values.detach()
        )
        value = clipped_value_loss(
            out.values,
            old_values,
            _rows(inputs.returns, idx, width, device),
            mask,
            clip_range=settings.value_clip,
            agg=loss_config.agg,
            **counts,
            norm_constant=loss_config.norm_constant,
        )
        loss = loss + settings.value_coef * value.loss
        stats.update(value.stats)
    return loss, stats


_MICRO_COUNT = "__micro_batches__"


class Stepper(Protocol):
    """How an update applies gradients: the single process's clip-and-step, or a data-parallel engine's."""

    def backward(self, loss: torch.Tensor, *, last: bool) -> None:
        """Accumulate the gradient of one micro-batch's loss (already normalised by the minibatch);
        `last`: the minibatch's last micro-batch (a data-parallel engine reduces gradients then)."""

    def step(self) -> float:
        """Clip, take the optimiser step and clear the gradients; returns the global grad norm."""


@dataclass
class LocalStepper:
    """The single-process optimiser step: `clip_grad_norm_` over `params`, then the optimiser."""

    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    grad_clip: float | None

    def backward(self, loss: torch.Tensor, *, last: bool) -> None:
        loss.backward()

    def step(self) -> float:
        clip = self.grad_clip if self.grad_clip is not None else float("inf")
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm


@dataclass(frozen=True)
class Shard:
    """This process's part of every minibatch: rank `rank` of `world` data-parallel ranks.

    Each minibatch is split into `world` contiguous shards and each shard into the same number of
    micro-batches on every rank (ZeRO-3 gathers parameters in every forward, so ranks must run as
    many); a rank whose micro-batch is empty runs a zero loss. `micro_batch_size` bounds a
    micro-batch's trajectories (memory); None = `grad_accumulation` micro-batches per minibatch.
    `share_prompts`: encode a group's shared prompt once; ZeRO-3 turns it off, as it makes the number
    of decoder calls depend on a rank's data. `share_prefix`: encode the system prompt all rows open
    with once (see `response_hidden`).
    """

    rank: int = 0
    world: int = 1
    micro_batch_size: int | None = None
    share_prompts: bool = True
    share_prefix: bool = True

    def micro_batches(self, minibatch: torch.Tensor, grad_accumulation: int) -> list[torch.Tensor]:
        per_rank = -(-len(minibatch) // self.world)
        if self.micro_batch_size is not None:
            count = -(-per_rank // self.micro_batch_size)
        else:
            count = min(grad_accumulation, per_rank)
        return list(minibatch.tensor_split(self.world)[self.rank].tensor_split(max(1, count)))


def _zero_loss(model: nn.Module, inputs: UpdateInputs, value_head: ValueHead | None) -> torch.Tensor:
    """A loss of exactly 0 through every parameter: an empty micro-batch still joins the collectives."""
    input_ids = inputs.batch.input_ids[:1, :1].to(model_device(model))
    out = model(input_ids=input_ids, output_hidden_states=value_head is not None)
    loss = out.logits.sum() * 0.0
    if value_head is not None:
        loss = loss + value_head(out.hidden_states[-1]).sum() * 0.0
    return loss


def ppo_update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    inputs: UpdateInputs,
    *,
    loss_config: PolicyLossConfig,
    settings: UpdateSettings,
    value_head: ValueHead | None = None,
    generator: torch.Generator | None = None,
    stepper: Stepper | None = None,
    shard: Shard = Shard(),
    sum_ranks: Callable[[dict[str, float]], dict[str, float]] | None = None,
) -> dict[str, float]:
    """Run the epochs; returns the loss statistics averaged over micro-batches, and the mean grad norm.

    Data parallel: every rank passes the whole batch, the same `generator` and its `shard`; the
    `stepper` averages gradients over ranks, so each micro-batch loss is scaled by the world size (the
    counts are the whole minibatch's: the sum over ranks is the single process's gradient exactly).
    `sum_ranks` adds up the ranks' statistics, so every rank reports the whole batch's.
    """
    size = inputs.batch.size
    # seq_mean_token_sum: one constant for every micro-batch. A run built from a config passes its
    # generation budget (Dr. GRPO's constant); this fallback, the step's width, varies between steps.
    if loss_config.norm_constant is None:
        loss_config = dataclasses.replace(
            loss_config, norm_constant=float(inputs.batch.response_ids.shape[1])
        )
    if stepper is None:
        if optimizer is None:
            raise ValueError("ppo_update needs an optimizer or a stepper")
        params = [p for p in model.parameters() if p.requires_grad]
        if value_head is not None:
            params += list(value_head.parameters())
        stepper = LocalStepper(params, optimizer, settings.grad_clip)
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
            micros = shard.micro_batches(mb, settings.grad_accumulation)
            for i, micro in enumerate(micros):
                last = i == len(micros) - 1
                if not len(micro):
                    stepper.backward(_zero_loss(model, inputs, value_head), last=last)
                    continue
                loss, stats = _micro_loss(
                    model, inputs, micro, loss_config=loss_config, settings=settings,
                    value_head=value_head, counts=counts, share_prompts=shard.share_prompts,
                    share_prefix=shard.share_prefix,
                )  # fmt: skip
                stepper.backward(loss * shard.world if shard.world > 1 else loss, last=last)
                for key, value in stats.items():
                    totals[key] += value
                micro_count += 1
            norms.append(stepper.step())
    model.eval()
    if sum_ranks is not None:
        totals = defaultdict(float, sum_ranks({**totals, _MICRO_COUNT: float(micro_count)}))
        micro_count = int(round(totals.pop(_MICRO_COUNT, 0.0)))
    out = {key: value / max(1, micro_count) for key, value in totals.items()}
    # token_mean losses of micro-batches add up to the minibatch loss; report that sum per minibatch
    for key in (keys.LOSS_POLICY, keys.LOSS_TOTAL, keys.LOSS_VALUE):
        if key in out:
            out[key] *= micro_count / max(1, len(norms))
    out[keys.LOSS_GRAD_NORM] = sum(norms) / len(norms)
    return out
