"""Prefix KV reuse across the turns of a multi-turn rollout (what vLLM's prefix caching does).

A finished row leaves the keys and values of every token it fed the model, filed under those ids.
The next turn of that trajectory asks for exactly those ids plus the last sampled token and the
tool-response glue, so only that suffix needs a forward pass. Entries are taken (not copied) on use
and the least recently stored go first past `max_tokens`. The cache holds activations of the current
weights: the engine clears it at the start of each rollout, since the trainer updates weights in place.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass
class CachedPrefix:
    """Per-layer (keys, values), each [kv_heads, length, head_dim], for `length` leading ids."""

    length: int
    layers: list[tuple[torch.Tensor, torch.Tensor]]


class PrefixCache:
    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], CachedPrefix] = OrderedDict()
        self._tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def store(self, ids: tuple[int, ...], prefix: CachedPrefix) -> None:
        if self.max_tokens <= 0 or prefix.length > self.max_tokens or ids in self._entries:
            return
        self._entries[ids] = prefix
        self._tokens += prefix.length
        while self._tokens > self.max_tokens:
            _, old = self._entries.popitem(last=False)
            self._tokens -= old.length

    def take(self, prompt: tuple[int, ...]) -> CachedPrefix | None:
        """Remove and return the longest entry that is a proper prefix of `prompt`."""
        best: tuple[int, ...] | None = None
        for ids in self._entries:
            longer = best is None or len(ids) > len(best)
            if longer and len(ids) < len(prompt) and prompt[: len(ids)] == ids:
                best = ids
        if best is None:
            return None
        prefix = self._entries.pop(best)
        self._tokens -= prefix.length
        return prefix


def row_prefix(cache: DynamicCache, row: int, mask: torch.Tensor) -> CachedPrefix:
    """The keys and values of one batch row at the columns `mask` marks as real tokens."""
    layers = [(layer.keys[row][:, mask], layer.values[row][:, mask]) for layer in cache.layers]
    return CachedPrefix(int(mask.sum()), layers)


def stacked_cache(hits: list[CachedPrefix | None], width: int) -> DynamicCache:
    """A batch cache of `width` columns: each row's prefix right-aligned, zeros (masked) before it."""
    reference = next(hit for hit in hits if hit is not None)
    layers = []
    for index, (ref_keys, _) in enumerate(reference.layers):
        heads, _, dim = ref_keys.shape
        keys = ref_keys.new_zeros((len(hits), heads, width, dim))
        values = torch.zeros_like(keys)
        for row, hit in enumerate(hits):
            if hit is not None and hit.length:
                keys[row, :, width - hit.length :] = hit.layers[index][0]
                values[row, :, width - hit.length :] = hit.layers[index][1]
        layers.append((keys, values))
    return DynamicCache(layers)
