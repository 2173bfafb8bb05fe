"""A test double of the part of vLLM's offline API that `trainers.backends.vllm` uses, with vLLM's names
and shapes (0.33: `LLM`, `SamplingParams`, `RequestOutput`, `CompletionOutput`, `Logprob`), so that a
rename in vLLM is one place to fix here and in the adapter.

Behaviour mirrored from vLLM: the engine holds its own copy of the weights, loaded from the model
directory; `generate` takes `TokensPrompt` dicts and one `SamplingParams` per prompt (unknown keywords
are a TypeError, as with vLLM's msgspec struct), returns every sampled id (the one completing a stop
string included) with `finish_reason` "stop" (`stop_reason`: the stop string, or None for the
end-of-sequence token) or "length", and with `logprobs=0` one `{token_id: Logprob}` per sampled token
from the processed distribution (`logprobs_mode="processed_logprobs"`). `sleep(level)` frees the KV
cache and, at level 2, the weights; `wake_up(tags)` restores "weights" and "kv_cache"; generating while
asleep is an error. `collective_rpc(name, args=...)` calls the method on every tensor-parallel worker,
whose class mixes in `worker_extension_cls`. Prefix caching counts the prompt tokens found cached.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import torch

from trainers.backends.sampler import processed_logprobs
from trainers.config.sampling import SamplingParams as OurSampling


class SamplingParams:
    """vLLM's `SamplingParams` fields the adapter may set (keyword-only, as vLLM's struct)."""

    def __init__(
        self,
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        max_tokens: int | None = 16,
        stop: str | list[str] | None = None,
        stop_token_ids: list[int] | None = None,
        include_stop_str_in_output: bool = False,
        logprobs: int | None = None,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
        detokenize: bool = True,
    ) -> None:
        if top_k < -1:
            raise ValueError("top_k must be -1 (disable), 0 (disable) or at least 1")
        self.n, self.temperature, self.top_p, self.top_k, self.seed = n, temperature, top_p, top_k, seed
        self.max_tokens, self.stop, self.stop_token_ids = max_tokens, stop, stop_token_ids or []
        self.include_stop_str_in_output, self.logprobs = include_stop_str_in_output, logprobs
        self.skip_special_tokens = skip_special_tokens
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self.detokenize = detokenize


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


class DoubleModel:
    """The worker's model: an HF causal LM with vLLM's `load_weights(weights=iterable of (name, tensor))`."""

    def __init__(self, hf_model: Any) -> None:
        self.hf = hf_model

    def parameters(self) -> Any:
        return self.hf.parameters()

    def load_weights(self, weights: Any) -> set[str]:
        params = dict(self.hf.named_parameters())
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor)  # vLLM's default_weight_loader: copy into the engine's tensor
                loaded.add(name)
        return loaded


class Worker:
    """A GPU worker: `model_runner.model` is the engine's model."""

    def __init__(self, model: DoubleModel) -> None:
        self.model_runner = type("ModelRunner", (), {})()
        self.model_runner.model = model


@dataclass
class Calls:
    """What the adapter asked of the engine, in order."""

    log: list[tuple] = field(default_factory=list)
    cached_prompt_tokens: int = 0


class LLM:
    """`vllm.LLM` over a tiny HF model on CPU: its own copy of the weights, one per tensor-parallel rank."""

    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
        enable_prefix_caching: bool | None = None,
        enable_sleep_mode: bool = False,
        enforce_eager: bool = False,
        logprobs_mode: str = "raw_logprobs",
        worker_extension_cls: str = "",
        max_model_len: int | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = {
            k: v for k, v in locals().items() if k not in ("self", "AutoModelForCausalLM", "AutoTokenizer")
        }
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        extension = _resolve(worker_extension_cls) if worker_extension_cls else object
        worker_cls = type("ExtendedWorker", (Worker, extension), {})  # vLLM mixes the extension in likewise
        self.workers = []
        for _ in range(tensor_parallel_size):
            hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
            self.workers.append(worker_cls(DoubleModel(hf)))
        self.sleep_mode, self.prefix_caching = enable_sleep_mode, bool(enable_prefix_caching)
        self.logprobs_mode = logprobs_mode
        self.asleep: set[str] = set()  # "weights", "kv_cache" while discarded
        self.calls = Calls()
        self.cache: list[list[int]] = []  # token sequences whose KV blocks are cached

    @property
    def model(self) -> Any:
        return self.workers[0].model_runner.model.hf

    # --- colocation --------------------------------------------------------------------------------
    def sleep(self, level: int = 1) -> None:
        if not self.sleep_mode:
            raise ValueError("Sleep mode is not enabled")
        self.calls.log.append(("sleep", level))
        self.asleep = {"weights", "kv_cache"}
        self.cache.clear()
        if level == 2:  # weights discarded: what wakes up is garbage until weights are loaded
            with torch.no_grad():
                for worker in self.workers:
                    for p in worker.model_runner.model.parameters():
                        p.fill_(float("nan"))

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.log.append(("wake_up", tuple(tags or ("weights", "kv_cache"))))
        self.asleep -= set(tags or ("weights", "kv_cache"))

    def collective_rpc(
        self, method: str, timeout: float | None = None, args: tuple = (), kwargs=None
    ) -> list:
        if "weights" in self.asleep:
            raise RuntimeError("collective_rpc on sleeping weights")
        self.calls.log.append(("collective_rpc", method))
        return [getattr(worker, method)(*args, **(kwargs or {})) for worker in self.workers]

    def reset_prefix_cache(self) -> bool:
        self.calls.log.append(("reset_prefix_cache",))
        self.cache.clear()
        return True

    # --- generation --------------------------------------------------------------------------------
    def generate(
        self, prompts: Any, sampling_params: Any = None, use_tqdm: bool = True
    ) -> list[RequestOutput]:
        if self.asleep:
            raise RuntimeError(f"generate while asleep ({sorted(self.asleep)})")
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        self.calls.log.append(("generate", len(prompts)))
        return [
            self._one(str(i), prompt["prompt_token_ids"], params)
            for i, (prompt, params) in enumerate(zip(prompts, sampling_params, strict=True))
        ]

    @torch.no_grad()
    def _one(self, request_id: str, prompt_ids: list[int], params: SamplingParams) -> RequestOutput:
        assert params.n == 1
        if self.prefix_caching:
            self.calls.cached_prompt_tokens += max(
                (_common(prompt_ids, seq) for seq in self.cache), default=0
            )
        ours = OurSampling(temperature=params.temperature, top_p=params.top_p, top_k=max(0, params.top_k))
        generator = torch.Generator().manual_seed(params.seed if params.seed is not None else 0)
        stops = [params.stop] if isinstance(params.stop, str) else list(params.stop or [])
        eos = self.tokenizer.eos_token_id
        ids: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        finish, stop_reason = "length", None
        while len(ids) < params.max_tokens:
            logits = self.model(input_ids=torch.tensor([prompt_ids + ids])).logits[0, -1:]
            logp = processed_logprobs(logits, ours)[0]
            if params.temperature == 0:
                token = int(logp.argmax())
            else:
                token = int(torch.multinomial(logp.exp(), 1, generator=generator))
            ids.append(token)
            logprobs.append({token: Logprob(float(logp[token]), rank=1)})
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            hit = next((s for s in stops if s and s in text), None)
            if hit is not None:
                finish, stop_reason = "stop", hit
                break
            if token == eos:
                finish = "stop"
                break
        if self.prefix_caching:
            self.cache.append(prompt_ids + ids[:-1])
        completion = CompletionOutput(
            0, self.tokenizer.decode(ids), ids, sum(float(next(iter(e.values())).logprob) for e in logprobs),
            logprobs if params.logprobs is not None else None, finish, stop_reason,
        )  # fmt: skip
        return RequestOutput(request_id, None, prompt_ids, [completion])


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _resolve(qualified: str) -> type:
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


class Api:
    """The `vllm` module as the adapter sees it: `vllm.LLM` and `vllm.SamplingParams`."""

    LLM = LLM
    SamplingParams = SamplingParams
