"""Evaluation on a held-out split: accuracy, pass@k, tool-call rate and OTC's tool productivity.

Run greedily (one sample) and sampled (temperature 1, k samples): a policy can look good greedily and
still sample badly, and RL trains the sampled policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainers.config.sampling import SamplingParams
from trainers.rewards.base import RewardContext
from trainers.rewards.correctness import Correctness
from trainers.rollout.protocol import Rollouts
from trainers.trajectory import Trajectory

IsCorrect = Callable[[Trajectory], bool]


def correctness_judge(mode: str = "math") -> IsCorrect:
    """The `correctness` reward component as a yes/no judge (math equivalence by default)."""
    component = Correctness(mode=mode)
    ctx = RewardContext()
    return lambda traj: component.score(traj, ctx) >= component.params.correct


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, arXiv 2107.03374 eq. 1)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def summarise(trajectories: Sequence[Trajectory], is_correct: IsCorrect, k: int) -> dict[str, float]:
    """Metrics over trajectories grouped by prompt; tool productivity = solved / tool calls (OTC).

    Failed calls are counted per trajectory and as a share of all calls; response length is the mean
    number of response tokens (policy tokens and tool output). pass@k is the unbiased estimator over
    each prompt's samples, reported when `k > 1`. A ratio with nothing to divide by is NaN.
    """
    correct = [is_correct(t) for t in trajectories]
    groups: dict[str, list[bool]] = {}
    for traj, ok in zip(trajectories, correct, strict=True):
        groups.setdefault(traj.group_id, []).append(ok)
    calls = sum(t.num_tool_calls for t in trajectories)
    failed = sum(t.num_failed_calls for t in trajectories)
    solved = sum(correct)
    n = len(trajectories) or 1
    out = {
        "accuracy": solved / n,
        "tool_call_rate": sum(t.num_tool_calls > 0 for t in trajectories) / n,
        "tool_calls_per_traj": calls / n,
        "tool_calls_per_solved": calls / solved if solved else math.nan,
        "tool_productivity": solved / calls if calls else math.nan,
        "failed_calls_per_traj": failed / n,
        "failed_call_rate": failed / calls if calls else math.nan,
        "response_length": sum(len(t.response_token_ids) for t in trajectories) / n,
        "answered_rate": sum(t.final_answer is not None for t in trajectories) / n,
    }
    if k > 1:
        out[f"pass@{k}"] = sum(pass_at_k(len(g), sum(g), k) for g in groups.values()) / max(1, len(groups))
    return out


@dataclass
class Evaluator:
    """Evaluates the live policy behind `rollouts` on `rows`."""

    rollouts: Rollouts
    rows: list[dict]
    is_correct: IsCorrect
    samples: int = 4  # k for pass@k at temperature 1
    temperature: float = 1.0
    greedy: bool = True
    on_mode: Callable[[str, dict[str, float]], None] | None = None  # after each mode: its name, metrics

    @property
    def mode_count(self) -> int:
        return 2 if self.greedy else 1

    def run(self, seed: int = 0) -> dict[str, float]:
        """`greedy/...` and `sampled/...` metrics; both use the rollouts' template, tools and limits."""
        results: dict[str, float] = {}
        modes = [("sampled", SamplingParams(temperature=self.temperature), self.samples)]
        if self.greedy:
            modes.insert(0, ("greedy", SamplingParams(temperature=0.0), 1))
        saved = self.rollouts.sampling
        try:
            for name, sampling, k in modes:
                self.rollouts.sampling = sampling
                trajectories = self.rollouts.run(self.rows, k, seed=seed)
                metrics = summarise(trajectories, self.is_correct, k)
                results.update({f"{name}/{key}": value for key, value in metrics.items()})
                if self.on_mode is not None:
                    self.on_mode(name, metrics)
        finally:
            self.rollouts.sampling = saved
        return results
