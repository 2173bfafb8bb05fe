"""The `Rollouts` seam: what the trainer asks of whatever turns a step's rows into trajectories.

Implemented in-process by `RolloutEngine` (trainers.rollout.engine) and `AgentRollouts` (an agent program
per episode, trainers.agent.rollouts), and by `RemoteRollouts`, which runs the rows as jobs on rollout
workers (trainers.rollout.remote.client). The trainer sees only this.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from trainers.config.sampling import SamplingParams
from trainers.rollout.scheduler import SchedulerStats
from trainers.trajectory import Trajectory


class Rollouts(Protocol):
    """Produces batches of trajectories from the live policy."""

    sampling: SamplingParams  # the trainer swaps it for greedy rollouts (ReMax) and evaluation
    last_stats: SchedulerStats | None  # batches, requests and generation time of the last `run`
    last_metrics: dict[str, float]  # what else the last `run` measured (remote: jobs, workers, version)
    policy_version: int  # the policy version the next `run` samples (the last `policy_changed`; 0 before)

    def run(
        self, rows: list[dict], samples_per_prompt: int = 1, *, seed: int | None = None
    ) -> list[Trajectory]:
        """All samples of all rows, ordered by row then sample index; sampling seeds derive from `seed`."""
        ...

    def prefetch(self, rows: list[dict], samples_per_prompt: int, seed: int | None) -> None:
        """Start, on the current weights, the `run` with these arguments the trainer will ask for next
        (bounded staleness); a no-op where nothing can run ahead of the trainer."""
        ...

    def policy_changed(self, version: int) -> None:
        """The trainer changed the policy's weights (an update, a loaded checkpoint); `version` is newer
        than any before. Later runs sample the new weights."""
        ...

    def generating(self) -> contextlib.AbstractContextManager[None]:
        """The context every `run` happens in: a sampler that shares the GPU with training (colocated
        vLLM) wakes with the newest weights inside and frees the memory on leaving; elsewhere a no-op."""
        ...
