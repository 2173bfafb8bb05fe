"""Starting a data-parallel run: the torchrun command, waiting on it, and rank 0 going first."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig


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
