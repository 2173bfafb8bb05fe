"""Training engines: who runs the update, writes checkpoints and speaks for the run (one loop, two engines).

The `Trainer` runs the same loop on every rank; what differs between one process and a data-parallel
group lives here. `TrainingEngine` is the single process (the default): every method is the identity
or the plain optimiser step. `DeepSpeedEngine` (`trainers.training.engines.zero`, which alone imports
deepspeed) shards each step's prompts over ranks, gathers the trajectories and trains with ZeRO;
`engines.factory` builds the one a config names, launching ranks lives in `launch`, decisions every
rank takes alike in `collectives`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from trainers.losses.objective import PolicyLossConfig
from trainers.training.checkpoint import Resumed, load_checkpoint, save_checkpoint
from trainers.training.update import UpdateInputs, UpdateSettings, ppo_update

if TYPE_CHECKING:
    from trainers.training.policy import ValueHead

T = TypeVar("T")


class TrainingEngine:
    """The single-process engine: this process rolls out, trains, logs and checkpoints everything."""

    rank = 0
    world = 1

    def __init__(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, value_head: ValueHead | None = None
    ) -> None:
        self.model, self.optimizer, self.value_head = model, optimizer, value_head

    @property
    def is_logger(self) -> bool:
        """True on the rank that logs metrics and trajectories and writes checkpoints (rank 0)."""
        return self.rank == 0

    # --- data parallel: the identity on one process ----------------------------------------------
    def share(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of `items`; shares in rank order concatenate to `items`."""
        n = len(items)
        return list(items[self.rank * n // self.world : (self.rank + 1) * n // self.world])

    def gather(self, items: list[T]) -> list[T]:
        """Every rank's `items` concatenated in rank order, on every rank."""
        return items

    def broadcast(self, value: T) -> T:
        """Rank 0's `value` on every rank (so decisions made from it agree)."""
        return value

    def full_weights(self) -> contextlib.AbstractContextManager[None]:
        """A context in which every parameter is whole on this rank (ZeRO-3 gathers them): rollouts."""
        return contextlib.nullcontext()

    # --- update and checkpoints ------------------------------------------------------------------
    def update(
        self,
        inputs: UpdateInputs,
        *,
        loss_config: PolicyLossConfig,
        settings: UpdateSettings,
        generator: torch.Generator,
    ) -> dict[str, float]:
        return ppo_update(
            self.model, self.optimizer, inputs, loss_config=loss_config, settings=settings,
            value_head=self.value_head, generator=generator,
        )  # fmt: skip

    def save(self, path: Path, *, step: int, scheduler: Any, tokenizer: Any, extra: dict[str, Any]) -> Path:
        return save_checkpoint(
            path, step=step, model=self.model, optimizer=self.optimizer, scheduler=scheduler,
            tokenizer=tokenizer, value_head=self.value_head, extra=extra,
        )  # fmt: skip

    def load(self, path: Path, *, scheduler: Any) -> Resumed:
        return load_checkpoint(
            path, model=self.model, optimizer=self.optimizer, scheduler=scheduler, value_head=self.value_head
        )

    def close(self) -> None:
        """Release the process group (nothing on one process)."""
