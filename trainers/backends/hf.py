"""Hugging Face transformers backend: our own batched sampling loop over a KV cache.

Left-padded prefill, then one token per step for the rows still running; a row that finishes
(end-of-sequence, stop string, its own token limit) leaves the batch and the cache at once, so it
stops costing compute. Works on CPU and GPU, with a model loaded from a local path or a live one
shared with the trainer (weights updated in place are seen by the next call).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import DynamicCache

from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest
from trainers.backends.prefix_cache import PrefixCache, row_prefix, stacked_cache
from trainers.backends.sampler import sample_step
from trainers.backends.stops import StopWatcher


class HFBackend(GenerationBackend):
    """Sampling backend over any `AutoModelForCausalLM`; `max_batch_size` bounds rows per forward."""

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: str | torch.dtype | None = None,
        max_batch_size: int = 256,
        prefix_cache_tokens: int = 32768,
    ) -> None:
        if isinstance(model, (str, Path)):
            from transformers import AutoModelForCausalLM

            from trainers.models.loading import load_tokenizer

            tokenizer = tokenizer or load_tokenizer(model)
            torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
            model = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch_dtype or "auto")
            model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
            model.eval()
        if tokenizer is None:
            raise ValueError("a tokenizer is required when passing a model object")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.prefix_cache = PrefixCache(prefix_cache_tokens)  # 0 turns prefix reuse off
        self.reused_tokens = 0  # prompt tokens whose keys and values came from the prefix cache
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos_ids = eos_token_ids(model, tokenizer)
        self._token_text: list[str] | None = None
        # transformers 5 renamed `past_key_values` to `cache`; remote-code models may still use the old name
        params = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.attn_implementation = getattr(model.config, "_attn_implementation", None)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def token_text(self) -> list[str]:
        """Each vocabulary id decoded alone, built once, for stop-string checks."""
        if self._token_text is None:
            ids = [[i] for i in range(len(self.tokenizer))]
            self._token_text = self.tokenizer.batch_decode(
                ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        return self._token_text

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        outputs: list[GenerationOutput | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):  # one batch per distinct sampling setting
            groups.setdefault(req.sampling.model_dump_json(exclude={"seed"}), []).append(i)
        for indices in groups.values():
            for start in range(0, len(indices), self.max_batch_size):
                chunk = indices[start : start + self.max_batch_size]
                for i, out in zip(chunk, self._generate_batch([requests[i] for i in chunk]), strict=True):
                    outputs[i] = out
        return [out for out in outputs if out is not None]

    @torch.no_grad()
    def _generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        params = requests[0].sampling
        seeds = row_seeds(requests, self.device)
        watchers = [StopWatcher(r.stop_strings) if r.stop_strings else None for r in requests]
        texts = self.token_text() if any(watchers) else None
        tokens: list[list[int]] = [[] for _ in requests]
        logps: list[list[float]] = [[] for _ in requests]
        results: list[GenerationOutput | None] = [None] * len(requests)

        logits, cache, attention, next_pos = self._prefill([r.prompt_ids for r in requests])
        active = list(range(len(requests)))  # request index of each batch row
        step = 0
        while True:
            step_tokens, step_logps = sample_step(logits, params, seeds, step)
            keep: list[int] = []
            for row, (tok, lp) in enumerate(zip(step_tokens.tolist(), step_logps.tolist(), strict=True)):
                i = active[row]
                tokens[i].append(tok)
                logps[i].append(lp)
                watcher = watchers[i]
                # ids past the tokenizer (vocabularies padded for speed) decode to nothing
                stop = watcher.push(texts[tok] if tok < len(texts) else "") if watcher and texts else None
                if stop is not None:
                    results[i] = GenerationOutput(tokens[i], logps[i], "stop", stop)
                elif tok in self.eos_ids:
                    results[i] = GenerationOutput(tokens[i], logps[i], "eos")
                elif len(tokens[i]) >= requests[i].max_new_tokens:
                    results[i] = GenerationOutput(tokens[i], logps[i], "length")
                else:
                    keep.append(row)
                    continue
                self._keep_prefix(requests[i], tokens[i], cache, row, attention)
            if not keep:
                break
            if len(keep) < len(active):  # finished rows leave the batch and the KV cache
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                attention, next_pos, step_tokens = attention[index], next_pos[index], step_tokens[index]
                seeds = seeds[index]
                active = [active[row] for row in keep]
            attention = torch.cat([attention, attention.new_ones((len(active), 1))], dim=-1)
            out = self.model(
                input_ids=step_tokens.unsqueeze(-1),
                attention_mask=self._decode_mask(attention),
                position_ids=next_pos,
                **{self.cache_arg: cache},
                use_cache=True,
            )
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
            step += 1
        return [r for r in results if r is not None]

    def _prefill(
        self, prompts: list[list[int]]
    ) -> tuple[torch.Tensor, DynamicCache, torch.Tensor, torch.Tensor]:
        """Last-position logits, KV cache, attention mask and next positions of the prompts.

        Identical prompts (the G samples of one GRPO group) are encoded once and their cache rows
        copied; a prompt that continues a cached prefix (the next turn of a trajectory) only
        encodes its new suffix.
        """
        unique: dict[tuple[int, ...], int] = {}
        row_of = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
        hits = [self.prefix_cache.take(ids) for ids in unique]
        cached = [hit.length if hit is not None else 0 for hit in hits]
        self.reused_tokens += sum(cached)
        suffixes = [list(ids[n:]) for ids, n in zip(unique, cached, strict=True)]
        input_ids, suffix_mask = left_pad(suffixes, self.pad_id, self.device)
        width = max(cached)
        prefix_mask = torch.zeros((len(unique), width), dtype=torch.long)
        for row, n in enumerate(cached):
            prefix_mask[row, width - n :] = 1
        attention = torch.cat([prefix_mask.to(self.device), suffix_mask], dim=-1)
        offsets = torch.tensor(cached, device=self.device).unsqueeze(-1)
        positions = (suffix_mask.cumsum(-1) - 1).clamp(min=0) + offsets
        cache = stacked_cache(hits, width) if width else DynamicCache()
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self.cache_arg: cache},
        )
        logits, next_pos = out.logits[:, -1, :], positions[:, -1:] + 1
        if len(unique) < len(prompts):
            index = torch.tensor(row_of, device=self.device)
            cache.batch_select_indices(index)
            logits, attention, next_pos = logits[index], attention[index], next_pos[index]
        return logits, cache, attention, next_pos

    def _keep_prefix(
        self, request: GenerationRequest, tokens: list[int], cache: DynamicCache, row: int, attention: Tensor
    ) -> None:
        """File a finished row's keys and values under the ids it fed (all but its last sampled token)."""
        if self.prefix_cache.max_tokens <= 0:
            return
        ids = (*request.prompt_ids, *tokens[:-1])
        prefix = row_prefix(cache, row, attention[row].bool())
        if prefix.length == len(ids):
            self.prefix_cache.store(ids, prefix)

    def _decode_mask(self, attention: Tensor) -> Tensor:
        """An additive 4D mask for a one-token step: padding is all there is to mask (no future keys),
        and a ready 4D mask spares the model rebuilding one from the 2D mask at every step."""
        if self.attn_implementation not in ("sdpa", "eager"):  # flash attention wants the 2D mask
            return attention
        dtype = self.model.dtype
        return (1 - attention[:, None, None, :]).to(dtype) * torch.finfo(dtype).min

    def begin_rollout(self) -> None:
        self.prefix_cache.clear()


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


def row_seeds(requests: list[GenerationRequest], device: torch.device) -> torch.Tensor:
    """Each request's own seed; unseeded ones draw theirs from torch's global generator."""
    seeds = [
        r.sampling.seed & (2**63 - 1) if r.sampling.seed is not None else int(torch.randint(0, 2**62, (1,)))
        for r in requests
    ]
    return torch.tensor(seeds, dtype=torch.int64, device=device)


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids from the tokenizer and the model's generation config."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.add(config_eos)
    elif config_eos:
        ids.update(config_eos)
    return ids
