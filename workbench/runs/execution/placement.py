"""A run's GPU request as the workbench reads it: what it asks for, and why a queued one may wait."""

from __future__ import annotations

from workbench.jobs.gpus import gpu_wait_note
from workbench.jobs.selectors import workers_online

from ..models import Run, RunStatus


def run_gpus_asked(run: Run) -> int:
    """The GPUs the run asks for (resources.gpus; snapshots older than the section ask for none)."""
    return run.typed_config.resources.gpus


def run_gpu_wait_note(*, run: Run) -> str:
    """For a queued run that asks for GPUs: why no live worker takes it now ("" when one could)."""
    if run.status != RunStatus.QUEUED:
        return ""
    return gpu_wait_note(gpus=run_gpus_asked(run), queue=run.queue, workers=workers_online())
