"""What every in-process `Rollouts` shares: the live backend, the blocking `run` over `arun` with
generation in the thread that trains, and the backend's weight sync and generation context."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from concurrent.futures import Executor

from trainers.backends.base import GenerationBackend
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.rollout.caller_thread import run_with_caller_executor
from trainers.rollout.scheduler import SchedulerStats
from trainers.templates import TEMPLATES, ChatTemplate
from trainers.trajectory import Trajectory


class InProcessRollouts(ABC):
    """Subclasses implement `arun`; `run` drives it with generation in the calling thread."""

    def __init__(
        self, backend: GenerationBackend, limits: RolloutLimits | None, sampling: SamplingParams | None
    ) -> None:
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.limits = limits or RolloutLimits()
        self.sampling = sampling or SamplingParams()
        self.last_stats: SchedulerStats | None = None  # batches and generation time of the last run
        self.last_metrics: dict[str, float] = {}  # what else the last run measured
        self.policy_version = 0  # the policy version the backend samples (0: the weights it was given)

    def bind_template(self, template: ChatTemplate | str) -> ChatTemplate:
        """The template by instance or registered name, tokenizing with the backend's tokenizer unless it
        has its own."""
        if isinstance(template, str):
            return TEMPLATES.get(template)(tokenizer=self.tokenizer)
        if template.tokenizer is None:
            template.tokenizer = self.tokenizer
        return template

    @abstractmethod
    async def arun(
        self,
        rows: list[dict],
        samples_per_prompt: int = 1,
        *,
        seed: int | None = None,
        executor: Executor | None = None,
    ) -> list[Trajectory]:
        """All samples of all rows, ordered by row then sample index; generation batches in `executor`."""

    def run(
        self, rows: list[dict], samples_per_prompt: int = 1, *, seed: int | None = None
    ) -> list[Trajectory]:
        """Blocking form of `arun` for the trainer, scripts and the CLI: generation runs in the calling
        thread (the one that trains, see `caller_thread`), everything else in an event loop beside it."""
        return run_with_caller_executor(
            lambda executor: self.arun(rows, samples_per_prompt, seed=seed, executor=executor)
        )

    def prefetch(self, rows: list[dict], samples_per_prompt: int, seed: int | None) -> None:  # noqa: B027
        """Nothing runs ahead in-process: generation needs the thread that trains."""

    def policy_changed(self, version: int) -> None:
        """The live policy the backend samples was updated: the backend takes the new weights."""
        self.policy_version = version
        self.backend.policy_changed()

    def generating(self) -> contextlib.AbstractContextManager[None]:
        """The backend's generation context (a colocated vLLM engine is awake only inside)."""
        return self.backend.generating()


def row_question(row: dict) -> str:
    """The question a dataset row asks (`question`, else `prompt`)."""
    return str(row.get("question", row.get("prompt", "")))


def row_ground_truth(row: dict) -> dict:
    """What a row holds back for the rewards: its reference answer and tool calls."""
    return {"answer": row.get("answer"), "tool_calls": row.get("tool_calls")}
