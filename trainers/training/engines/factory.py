"""The engine a config trains with (`training.engine`).

Only here is `trainers.training.engines.zero` (and with it deepspeed) imported, and only for a DeepSpeed
config."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from trainers.training.engines import TrainingEngine

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig
    from trainers.training.policy import ValueHead


def make_engine(
    config: RunConfig, model: nn.Module, optimizer: torch.optim.Optimizer, value_head: ValueHead | None
) -> TrainingEngine:
    """The config's engine (`training.engine`); deepspeed is imported only when it is the DeepSpeed one."""
    if config.training.engine == "local":
        return TrainingEngine(model, optimizer, value_head)
    from trainers.training.engines.zero import DeepSpeedEngine

    return DeepSpeedEngine(
        model, optimizer, value_head, config.training.deepspeed, grad_clip=config.optimizer.grad_clip
    )
