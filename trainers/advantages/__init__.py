"""Advantage estimators, found by name: `ESTIMATORS.get(name)(**params).compute(batch)`; each one's
config parameters are `ESTIMATORS.get(name).Params`."""

from trainers.advantages import dr_grpo, gigpo, grpo, ppo, reinforce_pp, remax, rloo  # noqa: F401 (registers)
from trainers.advantages.base import (
    ESTIMATORS,
    AdvantageBatch,
    AdvantageEstimator,
    AdvantageResult,
    EstimatorParams,
    Step,
)
from trainers.advantages.batch import advantage_batch_from_trajectories, trajectory_steps, write_advantages

__all__ = [
    "ESTIMATORS",
    "AdvantageBatch",
    "AdvantageEstimator",
    "AdvantageResult",
    "EstimatorParams",
    "Step",
    "advantage_batch_from_trajectories",
    "trajectory_steps",
    "write_advantages",
]
