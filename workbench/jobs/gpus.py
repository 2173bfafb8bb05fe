"""GPU placement: which GPUs a worker hands out, and which run holds each of them.

A worker advertises its GPUs in its heartbeat: the CUDA inventory, or the operator's WORKBENCH_GPUS list
("0,1,2,3", or "none"), which wins. A run that asks for `resources.gpus: N` takes N free ones in its
claim, as GpuAssignment rows unique per (machine, index): two workers started on one machine with
overlapping lists still never hand one GPU to two runs. The attempt's training process sees only its own
(CUDA_VISIBLE_DEVICES); the rows go when the attempt ends, or when a sweep hands its run on.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import IntegrityError, transaction

from workbench.jobs.models import GpuAssignment, WorkerHeartbeat

logger = logging.getLogger(__name__)
GPUS_ENV = "WORKBENCH_GPUS"
CUDA_ENV = "CUDA_VISIBLE_DEVICES"
TAKE_TRIES = 3  # a concurrent claim that took one of the same GPUs: look again this many times


class GpusBusy(Exception):
    """This worker has fewer free GPUs than the run asks for now; the delivery is tried again later."""


def gpu_list_setting(environ=os.environ) -> list[int] | None:
    """WORKBENCH_GPUS as indices ("none" or empty: no GPU), or None when it is not set."""
    text = environ.get(GPUS_ENV)
    if text is None:
        return None
    text = text.strip().lower()
    if text in ("", "none"):
        return []
    try:
        indices = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"{GPUS_ENV} must be GPU indices like 0,1,2,3 or none, not {text!r}") from None
    if any(index < 0 for index in indices):
        raise ValueError(f"{GPUS_ENV} lists a negative GPU index: {text!r}")
    return indices


def _configured(environ=os.environ) -> list[int] | None:
    """gpu_list_setting, where a malformed list hands out no GPU (logged) rather than stop the worker."""
    try:
        return gpu_list_setting(environ)
    except ValueError as exc:
        logger.error("%s; this worker hands out no GPU", exc)
        return []


def gpus_advertised(inventory: list[dict], environ=os.environ) -> list[dict]:
    """The GPUs this worker hands out: the inventory, or WORKBENCH_GPUS (a listed index the inventory does
    not know, as on a CPU test machine, is advertised by its index alone)."""
    chosen = _configured(environ)
    if chosen is None:
        return inventory
    known = {gpu["index"]: gpu for gpu in inventory}
    return [known.get(index, {"index": index, "name": GPUS_ENV, "memory_gb": None}) for index in chosen]


def machine_of(worker: str) -> str:
    """The machine of a Celery hostname (name@host): GPUs are counted per machine, not per worker."""
    return worker.rpartition("@")[2] or worker


def worker_gpu_indices(worker: str) -> list[int]:
    """The GPUs `worker` (this process's Celery worker) hands out: WORKBENCH_GPUS, else its heartbeat's
    inventory (empty until the worker's probe has answered)."""
    chosen = _configured()
    if chosen is not None:
        return chosen
    beat = WorkerHeartbeat.objects.filter(hostname=worker).values_list("gpus", flat=True).first()
    return sorted(gpu["index"] for gpu in beat or [])


def gpus_take(*, run, worker: str, count: int, indices: Iterable[int]) -> list[int]:
    """In the claim's transaction: hold `count` of `indices` free on the worker's machine for the run's
    attempt (run.attempts, already incremented), lowest first; GpusBusy when fewer are free."""
    if count == 0:
        return []
    host, offered = machine_of(worker), sorted(set(indices))
    if count > len(offered):
        raise GpusBusy(f"run {run.pk} asks for {count} GPUs; {worker} has {len(offered)}")
    for _ in range(TAKE_TRIES):
        taken = set(GpuAssignment.objects.filter(host=host).values_list("index", flat=True))
        free = [index for index in offered if index not in taken]
        if len(free) < count:
            raise GpusBusy(f"run {run.pk} asks for {count} GPUs; {len(free)} of {worker}'s are free")
        chosen = free[:count]
        rows = [
            GpuAssignment(host=host, index=i, worker=worker, run=run, attempt=run.attempts) for i in chosen
        ]
        try:
            with transaction.atomic():  # a savepoint: a GPU another claim took meanwhile undoes only this
                GpuAssignment.objects.bulk_create(rows)
            return chosen
        except IntegrityError:
            continue
    raise GpusBusy(f"run {run.pk}: other claims took {worker}'s free GPUs meanwhile")


def gpus_release(*, run_id: int, attempt: int | None = None) -> int:
    """Free the GPUs of the run's attempt (every attempt up to and including it; all when None)."""
    rows = GpuAssignment.objects.filter(run_id=run_id)
    if attempt is not None:
        rows = rows.filter(attempt__lte=attempt)
    return rows.delete()[0]


@contextmanager
def cuda_visible(indices: list[int] | None) -> Iterator[str | None]:
    """CUDA_VISIBLE_DEVICES for the attempt trained in this process ("" hides every GPU; None leaves the
    variable alone), restored afterwards. CUDA reads it once, when a process first uses it: a process
    that already did for other GPUs cannot be moved, so GPU workers end a pool process after each task
    (--max-tasks-per-child=1) and this refuses rather than train on a GPU another run holds."""
    if indices is None:
        yield os.environ.get(CUDA_ENV)
        return
    value, before = ",".join(str(i) for i in indices), os.environ.get(CUDA_ENV)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized() and before != value:
        raise RuntimeError(
            f"this worker process already uses CUDA with {CUDA_ENV}={before}, not this run's {value!r}: "
            "start GPU workers with --max-tasks-per-child=1"
        )
    os.environ[CUDA_ENV] = value
    try:
        yield value
    finally:
        if before is None:
            os.environ.pop(CUDA_ENV, None)
        else:
            os.environ[CUDA_ENV] = before


def gpu_launch_error(*, gpus: int, queue: str, workers: Iterable[WorkerHeartbeat]) -> str | None:
    """Why a run asking for `gpus` would wait for ever on `queue`, given the live workers: None when one
    of them has that many, or when none consumes the queue at all (it may be starting: the run waits)."""
    if gpus == 0:
        return None
    counts = [len(w.gpus) for w in workers if queue in w.queues]
    if not counts or max(counts) >= gpus:
        return None
    if max(counts) == 0:
        return f"No live worker on queue {queue} has a GPU; this run asks for {gpus}."
    return (
        f"This run asks for {gpus} GPUs; the live workers on queue {queue} have at most {max(counts)}. "
        f"Ask for fewer (resources.gpus) or start a worker with more."
    )


def gpu_wait_note(*, gpus: int, queue: str, workers: Iterable[WorkerHeartbeat]) -> str:
    """For a queued run's page: why it may wait (no live worker on its queue has that many GPUs), or ""."""
    if gpus == 0:
        return ""
    workers = [w for w in workers if queue in w.queues]
    if not workers:
        return f"Waiting for a worker: none is live on queue {queue}, and this run asks for {gpus} GPU(s)."
    return gpu_launch_error(gpus=gpus, queue=queue, workers=workers) or ""
