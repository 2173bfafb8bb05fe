"""Hidden states of response positions with shared tokens encoded once (shared-prefix training).

The G samples of a GRPO group share their prompt. Encoding it G times in the training forward pass
repeats work: instead, each distinct prompt runs through the decoder once with a KV cache, the cache
rows are repeated for the samples that share it, and the responses attend to them. Attention sees the
same keys and values as in a full forward, so outputs match; gradients reaching a shared prompt's keys
and values from all its samples add up, as they would across G separate copies.

Rows with distinct prompts (SFT batches, one sample per prompt) still open alike: the system prompt
with its tool schemas is often a third of a row. That common prefix is encoded once the same way.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from trainers.backends.prefill_plan import distinct, left_pad

MIN_SHARED_PREFIX = 16  # shorter common prefixes are not worth a second decoder call


def distinct_prompts(
    input_ids: torch.Tensor, prompt_lengths: torch.Tensor
) -> tuple[list[list[int]], torch.Tensor]:
    """The distinct prompts of a batch and, per row, the index of its prompt."""
    rows = zip(input_ids, prompt_lengths.tolist(), strict=True)
    prompts, row_of = distinct(row[:length].tolist() for row, length in rows)
    return [list(ids) for ids in prompts], torch.tensor(row_of, dtype=torch.long, device=input_ids.device)


def shared_prompt_hidden(
    decoder: nn.Module,
    cache_arg: str,
    prompts: list[list[int]],
    row_of: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_lengths: torch.Tensor,
    response_ids: torch.Tensor,
) -> torch.Tensor:
    """[B, T, H]: the last hidden state at the position that predicts each response token.

    `prompts` and `row_of` come from `distinct_prompts`; `attention_mask` is the full rows' mask.
    """
    device = response_ids.device
    prompt_ids, prompt_mask = left_pad(prompts, 0, device)  # the pad id is masked: any id will do
    cache = DynamicCache()
    encoded = decoder(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=(prompt_mask.cumsum(-1) - 1).clamp(min=0),
        use_cache=True,
        **{cache_arg: cache},
    ).last_hidden_state
    cache.batch_select_indices(row_of)  # a differentiable gather: gradients of shared rows add up
    resp_len = response_ids.shape[1]
    steps = torch.arange(resp_len, device=device)[None, :]
    response_lengths = attention_mask.sum(1) - prompt_lengths
    response_mask = (steps < response_lengths[:, None]).to(attention_mask.dtype)
    hidden = decoder(
        input_ids=response_ids,
        attention_mask=torch.cat([prompt_mask[row_of], response_mask], dim=1),
        position_ids=prompt_lengths[:, None] + steps,
        use_cache=True,
        **{cache_arg: cache},
    ).last_hidden_state
    # response token 0 is predicted from the prompt's last position (the rightmost, prompts are left-padded)
    first = encoded[:, -1][row_of]
    return torch.cat([first[:, None], hidden[:, :-1]], dim=1)


def common_prefix_length(input_ids: torch.Tensor, prompt_lengths: torch.Tensor) -> int:
    """Leading tokens every row's prompt has in common, short of each prompt's last token (which
    predicts the first response token); 0 for a single row."""
    limit = int(prompt_lengths.min()) - 1
    if input_ids.shape[0] < 2 or limit <= 0:
        return 0
    differs = (input_ids[:, :limit] != input_ids[:1, :limit]).any(0).nonzero()
    return int(differs[0]) if len(differs) else limit


def shared_prefix_hidden(
    decoder: nn.Module,
    cache_arg: str,
    prefix: int,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_lengths: torch.Tensor,
    resp_len: int,
) -> torch.Tensor:
    """[B, T, H] as `shared_prompt_hidden`, for rows (right-padded) whose first `prefix` tokens are the
    same: those are encoded once, the rest of every row attends to them through the KV cache."""
    device, rows, width = input_ids.device, input_ids.shape[0], input_ids.shape[1]
    cache = DynamicCache()
    decoder(input_ids=input_ids[:1, :prefix], use_cache=True, **{cache_arg: cache})
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long, device=device))  # gradients add up
    hidden = decoder(
        input_ids=input_ids[:, prefix:],
        attention_mask=attention_mask,
        position_ids=torch.arange(prefix, width, device=device)[None, :].expand(rows, -1),
        use_cache=True,
        **{cache_arg: cache},
    ).last_hidden_state
    return hidden_before_responses(hidden, prompt_lengths - prefix, resp_len)


def hidden_before_responses(hidden: torch.Tensor, starts: torch.Tensor, resp_len: int) -> torch.Tensor:
    """[B, T, H] from [B, L, H]: token j of a response sits at its row's start + j and is predicted from
    the position before it."""
    positions = starts[:, None] + torch.arange(resp_len, device=hidden.device)[None, :] - 1
    positions = positions.clamp(0, hidden.shape[1] - 1)
    return hidden.gather(1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
