"""When a run's policy is evaluated: the one rule the training loop (inline evaluation), the checkpoint
schedule and the workbench's evaluation jobs (`evaluation.runner: jobs`) all follow."""

from __future__ import annotations

import math

from trainers.config.sections import EvaluationConfig


def evaluation_due(every_steps: int, step: int, *, last: bool) -> bool:
    """Whether the policy is evaluated after `step`: every `every_steps`-th step (0: none on schedule) and
    after the run's last step (`last`), whichever comes first."""
    return last or (every_steps > 0 and step % every_steps == 0)


def checkpoint_period(every_steps: int, evaluation: EvaluationConfig) -> int:
    """Steps between checkpoints: evaluation jobs read a checkpoint at every step their evaluation is due,
    so under `runner: jobs` the period also divides the evaluation's (the last step is always written)."""
    if evaluation.runner != "jobs":
        return every_steps
    return math.gcd(every_steps, evaluation.every_steps)
