"""A rollout job as a rollout worker accepts it: nothing in the task's payload is trusted.

The payload comes off the broker. Before anything is fetched or started, the job must belong to a running
run (`run_key` "run<id>"), its weights must be that run's published weights in this deployment's artifact
store (WORKBENCH_ARTIFACTS_URL; no other URL is read), its tools must be within the operator's bounds as the
run's config was at launch (bounds.py, with the run's team for data paths) and its device one the rollout
workers may use (rollout_device.py). The job runs with the bound tools: defaulted limits clamped, paths
resolved, as the trainer's own tools are.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from django.conf import settings

from trainers.workbench_api import ArtifactStore, RolloutJob

from ..config.bounds import OutOfBounds, run_config_bound
from ..config.rollout_device import rollout_cuda_allowed, rollout_cuda_refusal, rollout_device
from ..models import Run, RunStatus
from .rollout_dispatch import rollout_weights_key

RUN_KEY = re.compile(r"run(\d+)")
JOBS = "remote rollouts"


class RolloutJobRefused(ValueError):
    """A rollout job this worker will not run; the message says which part of it, and why."""


def rollout_job_bound(payload: Any) -> RolloutJob:
    """The job of `payload`, within the operator's bounds; RolloutJobRefused otherwise."""
    try:
        job = RolloutJob.from_dict(payload)
    except TypeError as exc:
        raise RolloutJobRefused(f"not a rollout job: {exc}") from None
    run_id, team_id = _running_run(job.run_key)
    _check_weights(job, run_id)
    spec = job.spec if isinstance(job.spec, dict) else {}
    tools, device = _bound_tools(spec.get("tools"), team_id), _device(spec)
    return replace(job, spec={**spec, "tools": tools, "device": device})


def _running_run(run_key: Any) -> tuple[int, int]:
    """(run id, team id) of the running run the job names."""
    match = RUN_KEY.fullmatch(run_key) if isinstance(run_key, str) else None
    team_id = None
    if match is not None:
        running = Run.objects.filter(pk=int(match[1]), status=RunStatus.RUNNING)
        team_id = running.values_list("team_id", flat=True).first()
    if match is None or team_id is None:
        raise RolloutJobRefused(f"run_key {run_key!r}: no running run of this deployment")
    return int(match[1]), team_id


def _check_weights(job: RolloutJob, run_id: int) -> None:
    """The run's own published weights in the configured artifact store, at a key inside it."""
    store = ArtifactStore.from_url(settings.ARTIFACTS_URL)
    if not isinstance(job.weights_url, str) or store.key_of(job.weights_url) != rollout_weights_key(run_id):
        raise RolloutJobRefused(
            f"weights_url {job.weights_url!r}: not run {run_id}'s published weights in this deployment's "
            f"artifact store (WORKBENCH_ARTIFACTS_URL, {store.url})"
        )
    try:
        store.url_of(f"{job.weights_prefix}/v{int(job.weight_version):06d}")
    except (TypeError, ValueError) as exc:
        raise RolloutJobRefused(f"weights_prefix or weight_version: {exc}") from None


def _bound_tools(tools: Any, team_id: int) -> list[dict[str, Any]]:
    """The job's tool bindings within the operator's bounds (a bare name is the tool's defaults)."""
    if not isinstance(tools, list):
        raise RolloutJobRefused("spec.tools: a list of tool bindings")
    bindings = [{"name": tool, "config": {}} if isinstance(tool, str) else tool for tool in tools]
    try:
        return run_config_bound({"tools": bindings}, team_id=team_id)["tools"]
    except OutOfBounds as exc:
        raise RolloutJobRefused(f"spec {exc}") from None


def _device(spec: dict[str, Any]) -> str:
    """The device to roll out on here; vLLM needs a GPU whatever the device says."""
    if (spec.get("generation") or {}).get("backend", "hf") != "hf" and not rollout_cuda_allowed():
        raise RolloutJobRefused(f"spec.generation: {rollout_cuda_refusal('vLLM', JOBS)}")
    try:
        return rollout_device(str(spec.get("device", "cpu")), JOBS)
    except ValueError as exc:
        raise RolloutJobRefused(f"spec.device {exc}") from None
