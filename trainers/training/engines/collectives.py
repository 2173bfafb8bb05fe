"""Decisions every rank of a process group takes alike; outside a group, the process's own."""

from __future__ import annotations

from collections.abc import Callable

import torch


def any_rank(flag: bool) -> bool:
    """Whether `flag` is true on any rank of the process group (a collective: every rank calls it);
    `flag` itself outside a group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def group_should_stop(should_stop: Callable[[], bool] | None) -> Callable[[], bool] | None:
    """`should_stop` answered for the whole process group: true on every rank as soon as it is true on
    one (each rank reads its cancel flag at its own moment). A collective: every rank must poll it at
    the same point, as the SFT warm start does after each step. Unchanged outside a group."""
    import torch.distributed as dist

    if should_stop is None or not (dist.is_available() and dist.is_initialized()):
        return should_stop
    return lambda: any_rank(should_stop())
