"""What a batch's prefill must encode: its distinct prompts, less what the prefix cache already holds.

Identical prompts (the G samples of one GRPO group) are encoded once and their rows copied afterwards;
a prompt that continues a cached prefix (the next turn of a trajectory) only encodes its new suffix.
Both decoders of the HF backend (the plain model calls and the fast decoder) start from this plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from trainers.backends.prefix_cache import CachedPrefix, PrefixCache


@dataclass
class PrefillPlan:
    """Per distinct prompt: its cached prefix (right-aligned in `width` columns) and left-padded suffix."""

    row_of: list[int]  # the distinct-prompt row of each request
    hits: list[CachedPrefix | None]
    input_ids: torch.Tensor  # [distinct, suffix columns]
    attention: torch.Tensor  # [distinct, width + suffix columns], 1 on real tokens
    positions: torch.Tensor  # [distinct, suffix columns]
    width: int

    @property
    def reused(self) -> int:
        return sum(hit.length for hit in self.hits if hit is not None)


def distinct(sequences: Iterable[Sequence[int]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct sequences in first-seen order and, for each input, the index of its own."""
    index: dict[tuple[int, ...], int] = {}
    row_of = [index.setdefault(tuple(seq), len(index)) for seq in sequences]
    return list(index), row_of


def plan_prefill(
    prompts: list[list[int]], prefix_cache: PrefixCache, pad_id: int, device: torch.device
) -> PrefillPlan:
    """Take each distinct prompt's longest cached prefix and lay out the rest for one forward pass."""
    unique, row_of = distinct(prompts)
    hits = [prefix_cache.take(ids) for ids in unique]
    cached = [hit.length if hit is not None else 0 for hit in hits]
    suffixes = [list(ids[n:]) for ids, n in zip(unique, cached, strict=True)]
    input_ids, suffix_mask = left_pad(suffixes, pad_id, device)
    width = max(cached)
    prefix_mask = torch.zeros((len(unique), width), dtype=torch.long)
    for row, n in enumerate(cached):
        prefix_mask[row, width - n :] = 1
    attention = torch.cat([prefix_mask.to(device), suffix_mask], dim=-1)
    offsets = torch.tensor(cached, device=device).unsqueeze(-1)
    positions = (suffix_mask.cumsum(-1) - 1).clamp(min=0) + offsets
    return PrefillPlan(row_of, hits, input_ids, attention, positions, width)


def left_pad(
    prompts: list[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention mask, padded on the left so every row ends at the last column."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        if prompt:
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
    return ids.to(device), mask.to(device)
