"""The device of jobs on the rollout workers: a run's remote rollouts and every evaluation.

Those jobs claim no GPU: a run's GPUs (resources.gpus) are its trainer's, held on the gpu-queue worker,
and a rollout worker serves every team's jobs. A job on CUDA there would share a GPU another team's run
holds. So they run on the CPU unless the operator declares GPUs set aside for the rollout workers, which no
gpu-queue worker hands out (WORKBENCH_ROLLOUT_CUDA): checked at launch and again on the rollout worker.
"""

from __future__ import annotations

from django.conf import settings

ROLLOUT_CUDA = "WORKBENCH_ROLLOUT_CUDA"


def rollout_cuda_allowed() -> bool:
    return bool(getattr(settings, ROLLOUT_CUDA))


def rollout_cuda_refusal(device: str, jobs: str) -> str:
    """Why `device` is refused for `jobs` (what runs on the rollout workers), and what to do instead."""
    return (
        f"{device}: {jobs} run on the rollout workers, which claim no GPU (a run's GPUs are its "
        "trainer's, and a rollout worker serves every team), so they would share a GPU another run holds. "
        "Use cpu, roll out locally on the run's own GPUs, or ask the operator to set aside GPUs for "
        f"rollouts ({ROLLOUT_CUDA})."
    )


def rollout_device(device: str, jobs: str) -> str:
    """The device a job on a rollout worker runs on: as asked where the operator allows CUDA there; else
    "auto" is the CPU and CUDA is refused (ValueError with the reason)."""
    if rollout_cuda_allowed():
        return device
    if device.startswith("cuda"):
        raise ValueError(rollout_cuda_refusal(device, jobs))
    return "cpu" if device == "auto" else device
