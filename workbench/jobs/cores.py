"""CPU cores: how many a worker has, and whether a CPU DeepSpeed run's ranks fit them.

A DeepSpeed run starts one process per rank on the worker that trains it (torchrun). With GPUs each rank
has its own (resources.gpus = ranks, checked against the workers' GPUs); a CPU run's ranks share the
worker's cores, so more ranks than cores only overloads a machine other teams' runs share. Workers
advertise their cores in the heartbeat (0: not reported, as by a worker of an older release).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from workbench.jobs.models import WorkerHeartbeat


def cores_here() -> int:
    """The CPU cores this process may run on (its affinity, which a container's cpuset narrows)."""
    return len(os.sched_getaffinity(0))


def cpu_ranks(config: dict[str, Any]) -> int | None:
    """The ranks of a DeepSpeed run on the CPU (they share the worker's cores); None for any other run."""
    training, resources = config.get("training") or {}, config.get("resources") or {}
    if training.get("engine") != "deepspeed" or resources.get("gpus"):
        return None
    return int((training.get("deepspeed") or {}).get("ranks", 0))


def _too_many(ranks: int, cores: int, where: str) -> str:
    return (
        f"{ranks} ranks on the CPU are {ranks} processes on one worker; {where} at most {cores} CPU cores. "
        f"Ask for at most {cores} ranks, or for GPUs (resources.gpus: one rank per GPU)."
    )


def ranks_launch_error(*, ranks: int, queue: str, workers: Iterable[WorkerHeartbeat]) -> str | None:
    """Why `ranks` CPU ranks fit no live worker on `queue`: None when one has the cores, or when none on the
    queue reports them (none is live yet: the worker checks its own cores before it starts the ranks)."""
    cores = [w.cpus for w in workers if queue in w.queues and w.cpus]
    if not cores or max(cores) >= ranks:
        return None
    return _too_many(ranks, max(cores), f"the live workers on queue {queue} have")


def ranks_here_error(ranks: int) -> str | None:
    """Why `ranks` CPU ranks do not fit this worker's cores, or None."""
    cores = cores_here()
    return None if ranks <= cores else _too_many(ranks, cores, "this worker has")
