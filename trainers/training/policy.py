"""Token logprobs, entropies and values of trajectories under a causal LM, in one padded forward pass.

Rows are prompt + response, right-padded; columns of the outputs are the response tokens of
`Trajectory.response_token_ids`, right-padded to the longest response, with `response_loss_mask`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from trainers.backends.hf import cache_argument
from trainers.models.device import model_device
from trainers.models.lora import is_peft
from trainers.training.prompt_sharing import (
    MIN_SHARED_PREFIX,
    common_prefix_length,
    distinct_prompts,
    hidden_before_responses,
    shared_prefix_hidden,
    shared_prompt_hidden,
)
from trainers.trajectory import Trajectory


@dataclass
class TokenBatch:
    """Trajectories as tensors: full sequences for the forward pass, response views for the loss."""

    input_ids: torch.Tensor  # [B, L] prompt + response, right-padded
    attention_mask: torch.Tensor  # [B, L]
    prompt_lengths: torch.Tensor  # [B]
    response_ids: torch.Tensor  # [B, T] right-padded
    response_mask: torch.Tensor  # [B, T] 1 on policy tokens, 0 on tool output, glue and padding

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device) -> TokenBatch:
        """The batch on `device` (itself when it is there already)."""
        if self.input_ids.device == device:
            return self
        return TokenBatch(**{f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)})

    def select(self, rows: Sequence[int] | torch.Tensor) -> TokenBatch:
        """A sub-batch (a minibatch) without the columns no selected row needs for its loss.

        Those are padding and whatever follows the last policy token (a final tool response): with
        causal attention, later tokens never change the logprobs or values of earlier ones.
        """
        idx = torch.as_tensor(rows, dtype=torch.long)
        attn = self.attention_mask[idx]
        policy_columns = self.response_mask[idx].any(0).nonzero()
        resp_len = int(policy_columns.max()) + 1 if len(policy_columns) else 1
        prompt_lengths = self.prompt_lengths[idx]
        seq_len = int(torch.minimum(attn.sum(1), prompt_lengths + resp_len).max())
        return TokenBatch(
            input_ids=self.input_ids[idx, :seq_len],
            attention_mask=attn[:, :seq_len],
            prompt_lengths=prompt_lengths,
            response_ids=self.response_ids[idx, :resp_len],
            response_mask=self.response_mask[idx, :resp_len],
        )


def collate(trajectories: Sequence[Trajectory], pad_token_id: int) -> TokenBatch:
    """Right-pad prompt + response ids; the response mask keeps only the policy's own tokens.

    The batch is on the CPU: `forward_policy` moves what the model reads to the model's device."""
    prompts = [t.prompt_token_ids for t in trajectories]
    responses = [t.response_token_ids for t in trajectories]
    masks = [t.response_loss_mask for t in trajectories]
    rows = len(trajectories)
    seq_len = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    resp_len = max(1, max(len(r) for r in responses))
    input_ids = torch.full((rows, seq_len), pad_token_id, dtype=torch.long)
    attention = torch.zeros((rows, seq_len), dtype=torch.long)
    response_ids = torch.full((rows, resp_len), pad_token_id, dtype=torch.long)
    response_mask = torch.zeros((rows, resp_len), dtype=torch.float32)
    for i, (p, r, m) in enumerate(zip(prompts, responses, masks, strict=True)):
        n = len(p) + len(r)
        input_ids[i, :n] = torch.tensor(p + r, dtype=torch.long)
        attention[i, :n] = 1
        if r:
            response_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            response_mask[i, : len(r)] = torch.tensor(m, dtype=torch.float32)
    lengths = torch.tensor([len(p) for p in prompts], dtype=torch.long)
    return TokenBatch(input_ids, attention, lengths, response_ids, response_mask)


@dataclass
class PolicyOutput:
    """Per response token: logprob of the taken token, entropy of the distribution, critic value."""

    logprobs: torch.Tensor  # [B, T]
    entropy: torch.Tensor | None  # [B, T]
    values: torch.Tensor | None  # [B, T]


class ValueHead(nn.Module):
    """PPO critic: a linear map of the last hidden state to a scalar value per token."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        # A zero start makes the first GAE advantages plain discounted returns, not noise.
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden).squeeze(-1)


def response_hidden(
    model: nn.Module, batch: TokenBatch, *, share_prompts: bool = True, share_prefix: bool = True,
    on_device: TokenBatch | None = None,
) -> torch.Tensor:  # fmt: skip
    """Last hidden state at the position that predicts each response token: [B, T, H].

    When rows share a prompt (the samples of a group) each distinct prompt is encoded once; when all
    prompts differ but open alike (a system prompt), that common prefix is encoded once. Unless
    `share_prompts` is False (ZeRO-3: every rank must call the decoder as often as the others), or
    `share_prefix` is False for the second.
    `batch` may be on the CPU (the prompts are compared there); the decoder reads `on_device`, the
    batch on the model's device (default: `batch` moved there).
    """
    decoder = model.get_decoder()
    dev = batch.to(model_device(model)) if on_device is None else on_device
    prompts, row_of = distinct_prompts(batch.input_ids, batch.prompt_lengths)
    cache_arg = cache_argument(decoder)
    mask, lengths, resp_len = dev.attention_mask, dev.prompt_lengths, dev.response_ids.shape[1]
    if share_prompts and cache_arg is not None and len(prompts) < batch.size:
        row_of = row_of.to(dev.input_ids.device)
        return shared_prompt_hidden(decoder, cache_arg, prompts, row_of, mask, lengths, dev.response_ids)
    prefix = common_prefix_length(batch.input_ids, batch.prompt_lengths)
    if share_prompts and share_prefix and cache_arg is not None and prefix >= MIN_SHARED_PREFIX:
        return shared_prefix_hidden(decoder, cache_arg, prefix, dev.input_ids, mask, lengths, resp_len)
    hidden = decoder(input_ids=dev.input_ids, attention_mask=mask).last_hidden_state
    return hidden_before_responses(hidden, lengths, resp_len)


def forward_policy(
    model: nn.Module,
    batch: TokenBatch,
    *,
    temperature: float = 1.0,
    with_entropy: bool = True,
    entropy_grad: bool = True,
    value_head: ValueHead | None = None,
    share_prompts: bool = True,
    share_prefix: bool = True,
) -> PolicyOutput:
    """Logprobs (and entropies, values) of the response tokens; the LM head sees response positions only.

    `entropy_grad=False` computes the entropy for metrics only, without an autograd graph.
    `share_prompts=False` runs one decoder pass whatever the batch, `share_prefix=False` unless rows
    share a whole prompt (see `response_hidden`).
    The batch may be on the CPU: the outputs are on the model's device.
    """
    host, batch = batch, batch.to(model_device(model))
    hidden = response_hidden(
        model, host, share_prompts=share_prompts, share_prefix=share_prefix, on_device=batch
    )
    logits = model.get_output_embeddings()(hidden).float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature  # the sampling distribution is the tempered one
    logp_all = F.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(-1, batch.response_ids[..., None]).squeeze(-1) * batch.response_mask
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(logp_all.exp() * logp_all).sum(-1) * batch.response_mask
    values = value_head(hidden) * batch.response_mask if value_head is not None else None
    return PolicyOutput(logprobs, entropy, values)


def trajectory_logprobs(
    model: nn.Module, trajectories: Sequence[Trajectory], pad_token_id: int, temperature: float = 1.0
) -> list[list[float]]:
    """Per-trajectory response logprobs (0 off-policy), for checking them against sampling logprobs."""
    batch = collate(trajectories, pad_token_id)
    with torch.no_grad():
        out = forward_policy(model, batch, temperature=temperature, with_entropy=False)
    return [out.logprobs[i, : len(t.response_token_ids)].tolist() for i, t in enumerate(trajectories)]


def frozen_copy(model: nn.Module) -> nn.Module:
    """The KL reference: a copy of the policy at the start of RL, in eval mode, without gradients."""
    ref = copy.deepcopy(model)
    ref.eval()
    for param in ref.parameters():
        param.requires_grad_(False)
    return ref


def reference_logprobs(reference: nn.Module, batch: TokenBatch, temperature: float = 1.0) -> torch.Tensor:
    """The KL reference's log-probs of the response tokens: a frozen copy's, or for a LoRA policy (a PEFT
    model passed as its own reference) the base model's, with the adapters disabled for the pass."""
    if not is_peft(reference):
        return forward_policy(reference, batch, temperature=temperature, with_entropy=False).logprobs
    with reference.disable_adapter():
        return forward_policy(reference, batch, temperature=temperature, with_entropy=False).logprobs
