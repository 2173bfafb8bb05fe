"""vLLM generation backend: a thin adapter from `GenerationRequest`s to `vllm.LLM.generate` and back.

Token ids go in (`TokensPrompt`), the sampled ids and the log-prob of each come out, with stop
strings, per-request seeds and vLLM's automatic prefix caching (a multi-turn continuation re-sends
the whole context and vLLM reuses the cached blocks of its prefix). The engine is built with
`logprobs_mode="processed_logprobs"`, so the reported log-prob is that of the distribution actually
sampled from (after temperature, top-k and top-p), as `HFBackend` reports it.

Colocated with training on the same GPU(s): generation runs inside `generating()`, which wakes the
engine, loads the trainer's live `policy` into it when the trainer said the policy changed
(`policy_changed`; `collective_rpc` to every tensor-parallel worker, which calls the model's own
`load_weights`; no restart, no files), and on leaving puts the engine to sleep (`LLM.sleep`: KV cache
freed, weights offloaded or dropped) so training has the GPU memory.

vLLM is not installed on CPU machines (its wheels need CUDA and the torch they were built with), so
everything here that touches vLLM goes through the few names below; the unit tests drive this module
with a test double of exactly those names (tests/trainers/backends/test_vllm_backend.py).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from pydantic import ConfigDict

from trainers.backends.base import FinishReason, GenerationBackend, GenerationOutput, GenerationRequest
from trainers.config.sections import VLLMConfig

# The worker extension class vLLM mixes into each of its workers (`LLM(worker_extension_cls=...)`);
# `collective_rpc(LOAD_WEIGHTS, ...)` calls its method on every worker.
WORKER_EXTENSION = "trainers.backends.vllm.PolicyWeightsExtension"
LOAD_WEIGHTS = "load_policy_weights"


class VLLMOptions(VLLMConfig):
    """How the engine is built and shares the GPU with training: the run config's `generation.vllm`,
    frozen (a backend's options do not change under it)."""

    model_config = ConfigDict(frozen=True)


def vllm_api() -> ModuleType:
    """The `vllm` package, with a plain error where it is not installed."""
    try:
        return importlib.import_module("vllm")
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "generation.backend 'vllm' needs the vllm package: install requirements-gpu.txt on a CUDA machine"
        ) from exc


def build_llm(
    model_path: str | Path,
    options: VLLMOptions,
    *,
    tokenizer_path: str | Path | None = None,
    seed: int = 0,
    api: Any = None,
) -> Any:
    """A `vllm.LLM` for `model_path` (a Hugging Face model directory) set up for RL rollouts."""
    api = api or vllm_api()
    kwargs: dict[str, Any] = {
        "model": str(model_path),
        "tokenizer": str(tokenizer_path or model_path),
        "dtype": options.dtype,
        "seed": seed,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "tensor_parallel_size": options.tensor_parallel_size,
        "enable_prefix_caching": options.enable_prefix_caching,
        "enable_sleep_mode": options.sleep,
        "enforce_eager": options.enforce_eager,
        "logprobs_mode": "processed_logprobs",
        "worker_extension_cls": WORKER_EXTENSION,
    }
    if options.max_model_len is not None:
        kwargs["max_model_len"] = options.max_model_len
    return api.LLM(**kwargs)


class PolicyWeightsExtension:
    """Mixed into every vLLM worker: loads named tensors with the model's own `load_weights`, which
    maps Hugging Face parameter names onto vLLM's fused, tensor-parallel-sharded parameters."""

    model_runner: Any  # set by the vLLM worker this class is mixed into

    def load_policy_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        device = next(self.model_runner.model.parameters()).device
        self.model_runner.model.load_weights(weights=((name, t.to(device)) for name, t in weights))
        return len(weights)


class VLLMBackend(GenerationBackend):
    """`GenerationBackend` over a `vllm.LLM`; `policy`: the trainer's live model, whose weights the
    engine takes over after each `policy_changed`. `api` is the `vllm` module (or a double)."""

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        *,
        policy: torch.nn.Module | None = None,
        options: VLLMOptions = VLLMOptions(),
        api: Any = None,
        loaded: bool = False,
    ) -> None:
        """`loaded`: the engine was built from the policy's current weights (else they load at the
        first rollout: the engine read model.path, and a live policy may differ, e.g. after SFT)."""
        self.llm, self.tokenizer, self.policy, self.options = llm, tokenizer, policy, options
        self.api = api or vllm_api()
        self.asleep = False
        self.stale = policy is not None and not loaded
        self.weight_loads = 0
        self._generating = 0  # depth of `generating()` contexts entered

    # --- GenerationBackend -----------------------------------------------------------------------
    def policy_changed(self) -> None:
        """The policy's weights changed: the engine loads them when it wakes to generate."""
        self.stale = True

    @contextlib.contextmanager
    def generating(self) -> Iterator[None]:
        """Awake with the policy's newest weights inside; asleep again (sleep mode on) once the
        outermost context is left."""
        self.wake()
        self._generating += 1
        try:
            yield
        finally:
            self._generating -= 1
            if not self._generating:
                self.sleep()

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        if not self._generating:
            raise RuntimeError(
                "VLLMBackend generates inside generating(), which wakes it with the policy's weights"
            )
        if not requests:
            return []
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]  # vllm.inputs.TokensPrompt
        params = [sampling_params(self.api, r) for r in requests]
        results = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        return [to_output(result.outputs[0]) for result in results]

    # --- colocation ------------------------------------------------------------------------------
    def sleep(self) -> None:
        """Free the engine's GPU memory for training; a no-op when asleep or when sleep is off."""
        if self.options.sleep and not self.asleep:
            self.llm.sleep(level=self.options.sleep_level)
            self.asleep = True
            # level 2 discards the weights: whatever the policy holds is loaded at the next wake
            self.stale = self.stale or (self.options.sleep_level >= 2 and self.policy is not None)

    def wake(self) -> None:
        """Weights back on the GPU (the policy's newest after an update), then the KV cache."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        if self.stale:
            self.load_policy_weights()
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False

    def load_policy_weights(self) -> None:
        """Copy the live policy's parameters into the running engine, then drop cached prefixes (their
        keys and values came from the old weights)."""
        if self.policy is None:
            return
        weights = [(name, p.detach()) for name, p in self.policy.named_parameters()]
        self.llm.collective_rpc(LOAD_WEIGHTS, args=(weights,))
        self.llm.reset_prefix_cache()
        self.stale = False
        self.weight_loads += 1


def sampling_params(api: Any, request: GenerationRequest) -> Any:
    """vLLM's `SamplingParams` for one request: one sample, the sampled token's log-prob (`logprobs=0`),
    stop strings kept in the output, special tokens kept (the ids are what matters)."""
    s = request.sampling
    return api.SamplingParams(
        n=1,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k if s.top_k > 0 else -1,
        seed=request_seed(request),
        max_tokens=request.max_new_tokens,
        stop=list(request.stop_strings) or None,
        include_stop_str_in_output=True,
        logprobs=0,
        skip_special_tokens=False,
        spaces_between_special_tokens=False,
    )


def request_seed(request: GenerationRequest) -> int:
    """The request's own seed; an unseeded one draws its seed from torch's global generator, as the HF
    backend does, so a seeded run is repeatable either way."""
    seed = request.sampling.seed
    return seed & (2**63 - 1) if seed is not None else int(torch.randint(0, 2**62, (1,)))


def to_output(completion: Any) -> GenerationOutput:
    """A `CompletionOutput` as a `GenerationOutput`. vLLM keeps every sampled id (the one completing a stop
    string too); `finish_reason` is "stop" for a stop string (`stop_reason` the string), the end-of-sequence
    token (`stop_reason` None) or a stop token id (an int), and "length" at `max_tokens`."""
    ids = list(completion.token_ids)
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise RuntimeError("vLLM returned no log-prob for some sampled token: requests must set logprobs=0")
    logprobs = [float(entry[token].logprob) for token, entry in zip(ids, completion.logprobs, strict=True)]
    reason, stop = completion.finish_reason, completion.stop_reason
    finish: FinishReason
    if reason == "length":
        finish = "length"
    elif reason == "stop":
        finish = "stop" if isinstance(stop, str) else "eos"
    else:
        raise RuntimeError(f"vLLM ended a request with finish_reason {reason!r}")
    return GenerationOutput(ids, logprobs, finish, stop if finish == "stop" else None)
