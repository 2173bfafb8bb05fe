"""Training engines: who runs the update, writes checkpoints and speaks for the run (one loop, two engines).

The `Trainer` runs the same loop on every rank; what differs between one process and a data-parallel
group lives here. `TrainingEngine` is the single process (the default): every method is the identity
or the plain optimiser step. `DeepSpeedEngine` (`trainers.training.engines.zero`, which alone imports
deepspeed) shards each step's prompts over ranks, gathers the trajectories and trains with ZeRO;
`engines.factory` builds the one a config names.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
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

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on some rank (a stop request, say)."""
        return flag

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


def distributed_rank() -> int | None:
    """This process's rank when a launcher (torchrun) started it as part of a group, else None."""
    return int(os.environ["RANK"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ else None


def torchrun_command(ranks: int, module_args: Sequence[str]) -> list[str]:
    """The command that runs `python -m trainers <module_args>` as `ranks` processes on this machine
    (a standalone rendezvous on a free port); several machines: see docs/deployment.md."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
        "-m", "trainers", *module_args,
    ]  # fmt: skip


def launch(ranks: int, module_args: Sequence[str]) -> int:
    """Run the command under torchrun and wait; its exit status (non-zero when any rank failed).

    SIGTERM is passed on to torchrun, which passes it to the ranks: they stop after the current step
    with a checkpoint, as one process does (Ctrl-C reaches them all from the terminal)."""
    child = subprocess.Popen(torchrun_command(ranks, module_args))
    previous = signal.signal(signal.SIGTERM, lambda sig, _frame: child.send_signal(sig))
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def group_should_stop(should_stop: Callable[[], bool] | None) -> Callable[[], bool] | None:
    """`should_stop` answered for the whole process group: true on every rank as soon as it is true on
    one (each rank reads its cancel flag at its own moment). A collective: every rank must poll it at
    the same point, as the SFT warm start does after each step. Unchanged outside a group."""
    import torch.distributed as dist

    if should_stop is None or not (dist.is_available() and dist.is_initialized()):
        return should_stop

    return lambda: any_rank(should_stop())


def any_rank(flag: bool) -> bool:
    """Whether `flag` is true on any rank of the process group (a collective: every rank calls it)."""
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)
