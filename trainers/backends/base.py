"""The generation-backend interface: batched token-in/token-out sampling with stop strings."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from trainers.config.sampling import SamplingParams

FinishReason = Literal["stop", "eos", "length"]


@dataclass
class GenerationRequest:
    """Continue `prompt_ids` for up to `max_new_tokens`; stop once the sampled text holds a stop string.

    `may_continue=False` says no later request will extend this context (a trajectory's last turn),
    so a backend need not keep its keys and values for reuse.
    """

    prompt_ids: list[int]
    max_new_tokens: int
    stop_strings: list[str] = field(default_factory=list)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    may_continue: bool = True


@dataclass
class GenerationOutput:
    """The ids exactly as sampled (the one completing a stop string included), their logprobs and, from
    backends that report it, the entropy (nats) of the distribution each was sampled from."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    stop_string: str | None = None
    entropies: list[float] | None = None


class GenerationBackend(ABC):
    """A policy that samples continuations; the HF backend here, vLLM later, behind the same call."""

    tokenizer: Any

    @abstractmethod
    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        """One output per request, in order. Blocking; the rollout engine calls it off its event loop."""

    def begin_rollout(self) -> None:
        """Drop state tied to the current weights (e.g. a prefix cache); the engine calls it per rollout."""
        return None

    def policy_changed(self) -> None:
        """The policy's weights changed; nothing to do for a backend that samples the live model."""
        return None

    def generating(self) -> contextlib.AbstractContextManager[None]:
        """The context `generate` runs in: a backend that holds the GPU only while it generates (vLLM
        colocated with training) wakes in it; nothing for one that samples the live model."""
        return contextlib.nullcontext()
