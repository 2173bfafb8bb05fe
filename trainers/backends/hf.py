"""Hugging Face transformers backend: our own batched sampling loop over a KV cache.

Left-padded prefill, then one token per step for the rows still running; a row that finishes
(end-of-sequence, stop string, its own token limit) leaves the batch and the cache at once, so it
stops costing compute. Works on CPU and GPU, with a model loaded from a local path or a live one
shared with the trainer (weights updated in place are seen by the next call).

Two decoders run the loop. For Qwen2, Llama and Mistral models the fast decoder
(`trainers.backends.fast_decoder`) reimplements the forward over a preallocated KV cache with fused
projections re-derived from the live weights at every `generate`; it samples the same tokens as the
model's own forward, with about a quarter less time per decode step for the tiny CPU policy
(tests/benchmarks/bench_generation.py). Other models, or configurations it does not reproduce (RoPE
scaling, sliding windows in effect, LoRA adapters: a PEFT policy samples through its base model's
forward, adapters injected), use one model call per step with a `DynamicCache`, as
does every model with `HFBackend(..., fast_decode=False)`.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor
from transformers import DynamicCache

from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest
from trainers.backends.fast_decoder import FastDecoder, FastWeights, fits, unsupported_reason
from trainers.backends.prefill_plan import PrefillPlan, plan_prefill
from trainers.backends.prefix_cache import CachedPrefix, PrefixCache, row_prefix, stacked_cache
from trainers.backends.sampler import sample_step
from trainers.backends.stops import StopWatcher
from trainers.models.device import model_device
from trainers.models.lora import unwrap


class Decoder(Protocol):
    """One batch's forward passes and KV cache; rows are numbered as in the sampling loop's batch."""

    def prefill(self, plan: PrefillPlan) -> Tensor: ...  # last-position logits [requests, vocab]
    def step(self, tokens: Tensor) -> Tensor: ...  # feed one token per row, logits [rows, vocab]
    def keep(self, rows: list[int]) -> list[int]: ...  # drop the other rows; returns the new row order
    def prefix(self, row: int) -> CachedPrefix: ...  # keys and values of the row's fed tokens


class HFBackend(GenerationBackend):
    """Sampling backend over any `AutoModelForCausalLM`; `max_batch_size` bounds rows per forward.

    `fast_decode` (default on) uses the fast decoder where `unsupported_reason(model)` is None.
    """

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: str | torch.dtype | None = None,
        max_batch_size: int = 256,
        prefix_cache_tokens: int = 32768,
        fast_decode: bool = True,
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
        # a LoRA policy samples through its base model's forward, where PEFT injected the adapters; its
        # projections are then adapter layers, which the fast decoder does not reproduce
        self.model = unwrap(model)
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.prefix_cache = PrefixCache(prefix_cache_tokens)  # 0 turns prefix reuse off
        self.reused_tokens = 0  # prompt tokens whose keys and values came from the prefix cache
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos_ids = eos_token_ids(self.model, tokenizer)
        self._token_text: list[str] | None = None
        self.cache_arg = cache_argument(self.model) or "past_key_values"
        self.fast_decode = fast_decode and unsupported_reason(self.model) is None

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

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
        # fused copies of the weights as they are now: the trainer updates them in place between calls
        # rechecked: adapters injected after construction turn the fast decoder off rather than bypassing them
        fast = self.fast_decode and unsupported_reason(self.model) is None
        weights = FastWeights.from_model(self.model) if fast else None
        for i, req in enumerate(requests):  # one batch per distinct sampling setting
            groups.setdefault(req.sampling.model_dump_json(exclude={"seed"}), []).append(i)
        for indices in groups.values():
            for start in range(0, len(indices), self.max_batch_size):
                chunk = indices[start : start + self.max_batch_size]
                batch = self._generate_batch([requests[i] for i in chunk], weights)
                for i, out in zip(chunk, batch, strict=True):
                    outputs[i] = out
        return [out for out in outputs if out is not None]

    @torch.no_grad()
    def _generate_batch(
        self, requests: list[GenerationRequest], weights: FastWeights | None
    ) -> list[GenerationOutput]:
        params = requests[0].sampling
        seeds = row_seeds(requests, self.device)
        watchers = [StopWatcher(r.stop_strings) if r.stop_strings else None for r in requests]
        texts = self.token_text() if any(watchers) else None
        tokens: list[list[int]] = [[] for _ in requests]
        logps: list[list[float]] = [[] for _ in requests]
        ents: list[list[float]] = [[] for _ in requests]
        results: list[GenerationOutput | None] = [None] * len(requests)

        plan = plan_prefill([r.prompt_ids for r in requests], self.prefix_cache, self.pad_id, self.device)
        self.reused_tokens += plan.reused
        decoder = self._decoder(plan, max(r.max_new_tokens for r in requests), weights)
        logits = decoder.prefill(plan)
        active = list(range(len(requests)))  # request index of each batch row
        step = 0
        while True:
            step_tokens, step_logps, step_ents = sample_step(logits, params, seeds, step)
            keep: list[int] = []
            drawn = zip(step_tokens.tolist(), step_logps.tolist(), step_ents.tolist(), strict=True)
            for row, (tok, lp, ent) in enumerate(drawn):
                i = active[row]
                tokens[i].append(tok)
                logps[i].append(lp)
                ents[i].append(ent)
                watcher = watchers[i]
                # ids past the tokenizer (vocabularies padded for speed) decode to nothing
                stop = watcher.push(texts[tok] if tok < len(texts) else "") if watcher and texts else None
                if stop is not None:
                    results[i] = GenerationOutput(tokens[i], logps[i], "stop", stop, ents[i])
                elif tok in self.eos_ids:
                    results[i] = GenerationOutput(tokens[i], logps[i], "eos", entropies=ents[i])
                elif len(tokens[i]) >= requests[i].max_new_tokens:
                    results[i] = GenerationOutput(tokens[i], logps[i], "length", entropies=ents[i])
                else:
                    keep.append(row)
                    continue
                self._keep_prefix(requests[i], tokens[i], decoder, row)
            if not keep:
                break
            if len(keep) < len(active):  # finished rows leave the batch and the KV cache
                order = decoder.keep(keep)
                index = torch.tensor(order, device=self.device)
                step_tokens, seeds = step_tokens[index], seeds[index]
                active = [active[row] for row in order]
            logits = decoder.step(step_tokens)
            step += 1
        return [r for r in results if r is not None]

    def _decoder(self, plan: PrefillPlan, max_new_tokens: int, weights: FastWeights | None) -> Decoder:
        """The fast decoder where it reproduces the model, plain model calls otherwise."""
        columns = plan.attention.shape[1] + max_new_tokens - 1  # the last sampled token is never fed
        if weights is not None and fits(self.model, columns):
            return FastDecoder(weights, len(plan.row_of), columns)
        return HFDecoder(self.model, self.cache_arg)

    def _keep_prefix(self, request: GenerationRequest, tokens: list[int], decoder: Decoder, row: int) -> None:
        """File a finished row's keys and values under the ids it fed (all but its last sampled token)."""
        if self.prefix_cache.max_tokens <= 0 or not request.may_continue:
            return
        ids = (*request.prompt_ids, *tokens[:-1])
        prefix = decoder.prefix(row)
        if prefix.length == len(ids):
            self.prefix_cache.store(ids, prefix)

    def begin_rollout(self) -> None:
        self.prefix_cache.clear()


class HFDecoder:
    """The model's own forward, one call per step over a `DynamicCache` that grows by concatenation."""

    def __init__(self, model: Any, cache_arg: str) -> None:
        self.model = model
        self.cache_arg = cache_arg
        self.attn_implementation = getattr(model.config, "_attn_implementation", None)
        self.cache = DynamicCache()
        self.attention = torch.zeros((0, 0), dtype=torch.long)
        self.next_pos = torch.zeros((0, 1), dtype=torch.long)

    def prefill(self, plan: PrefillPlan) -> Tensor:
        if plan.width:
            self.cache = stacked_cache(plan.hits, plan.width)
        out = self.model(
            input_ids=plan.input_ids,
            attention_mask=plan.attention,
            position_ids=plan.positions,
            use_cache=True,
            logits_to_keep=1,
            **{self.cache_arg: self.cache},
        )
        logits = out.logits[:, -1, :]
        self.attention, self.next_pos = plan.attention, plan.positions[:, -1:] + 1
        if len(plan.row_of) > len(plan.hits):  # copy the rows of repeated prompts
            index = torch.tensor(plan.row_of, device=logits.device)
            self.select(index)
            logits = logits[index]
        return logits

    def step(self, tokens: Tensor) -> Tensor:
        self.attention = torch.cat([self.attention, self.attention.new_ones((len(tokens), 1))], dim=-1)
        out = self.model(
            input_ids=tokens.unsqueeze(-1),
            attention_mask=self._decode_mask(self.attention),
            position_ids=self.next_pos,
            **{self.cache_arg: self.cache},
            use_cache=True,
        )
        self.next_pos = self.next_pos + 1
        return out.logits[:, -1, :]

    def keep(self, rows: list[int]) -> list[int]:
        self.select(torch.tensor(rows, device=self.attention.device))
        return rows

    def select(self, index: Tensor) -> None:
        self.cache.batch_select_indices(index)
        self.attention, self.next_pos = self.attention[index], self.next_pos[index]

    def prefix(self, row: int) -> CachedPrefix:
        return row_prefix(self.cache, row, self.attention[row].bool())

    def _decode_mask(self, attention: Tensor) -> Tensor:
        """An additive 4D mask for a one-token step: padding is all there is to mask (no future keys),
        and a ready 4D mask spares the model rebuilding one from the 2D mask at every step."""
        if self.attn_implementation not in ("sdpa", "eager"):  # flash attention wants the 2D mask
            return attention
        dtype = self.model.dtype
        return (1 - attention[:, None, None, :]).to(dtype) * torch.finfo(dtype).min


def cache_argument(module: Any) -> str | None:
    """The forward's KV-cache keyword: transformers 5 renamed `past_key_values` to `cache`, remote-code
    models may still use the old name; None when the forward takes neither."""
    params = inspect.signature(module.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


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
