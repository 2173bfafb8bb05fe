"""Hidden states of response positions with each distinct prompt encoded once (shared-prefix training).

The G samples of a GRPO group share their prompt. Encoding it G times in the training forward pass
repeats work: instead, each distinct prompt runs through the decoder once with a KV cache, the cache
rows are repeated for the samples that share it, and the responses attend to them. Attention sees the
same keys and values as in a full forward, so outputs match; gradients reaching a shared prompt's keys
and values from all its samples add up, as they would across G separate copies.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from trainers.backends.prefill_plan import distinct, left_pad


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
