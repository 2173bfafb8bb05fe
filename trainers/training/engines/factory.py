"""The engine a config trains with (`training.engine`), and the order in which a DeepSpeed group starts.

Only here is `trainers.training.engines.zero` (and with it deepspeed) imported, and only for a DeepSpeed
config."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from torch import nn

from trainers.training.engines import TrainingEngine

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig
    from trainers.training.policy import ValueHead


@contextlib.contextmanager
def rank_zero_first(config: RunConfig) -> Iterator[None]:
    """Rank 0 runs the block before the others (it builds the tiny model once, they then load it)."""
    if config.training.engine != "deepspeed":
        yield
        return
    from trainers.training.engines.zero import init_distributed

    init_distributed(config.training.deepspeed)
    import torch.distributed as dist

    if dist.get_rank() != 0:
        dist.barrier()
    yield
    if dist.get_rank() == 0:
        dist.barrier()


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
