"""Policy, KL, entropy and value losses over policy tokens (mask == 1) only."""

from trainers.losses.aggregate import AGGREGATIONS, Aggregation, aggregate, masked_mean
from trainers.losses.entropy import entropy_from_logits
from trainers.losses.kl import KL_KINDS, KLKind, kl_penalty
from trainers.losses.objective import PolicyLossConfig, policy_objective
from trainers.losses.policy import LossOutput, clipped_surrogate
from trainers.losses.value import clipped_value_loss

__all__ = [
    "AGGREGATIONS",
    "KL_KINDS",
    "Aggregation",
    "KLKind",
    "LossOutput",
    "PolicyLossConfig",
    "aggregate",
    "clipped_surrogate",
    "clipped_value_loss",
    "entropy_from_logits",
    "kl_penalty",
    "masked_mean",
    "policy_objective",
]
