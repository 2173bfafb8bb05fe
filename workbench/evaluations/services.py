"""Writes on evaluations from the browser: compose and validate the config snapshot, create, launch.

The snapshot is an EvalConfig without its data file and directory (the worker exports the split's rows):
a checkpoint's evaluation starts from its run's config (template, tools, limits, sampling, reward) and
pinned catalog versions replace those sections as they do for a run.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from trainers.workbench_api import ConfigError, RunConfig, eval_config_from_run, validate_config
from workbench.accounts.access import require_role, team_id_of
from workbench.accounts.models import Role
from workbench.celery_app import app as celery_app
from workbench.datasets.models import DatasetKind
from workbench.runs.config.bounds import OutOfBounds, run_config_bound
from workbench.runs.config.rollout_device import rollout_cuda_allowed, rollout_device
from workbench.runs.services import run_config_compose

from .models import Evaluation, ModelSource, Split

# the snapshot leaves these to the worker
WORKER_FIELDS = {"data_path", "output_dir", "trajectories"}
SAMPLES_MAX = 64
EVALUATE_TASK = "workbench.evaluations.tasks.rollout_evaluate"  # tasks.py registers it by this name


def _split_count(dataset_version, split: str) -> int:
    return dataset_version.eval_count if split == Split.EVAL else dataset_version.train_count


def _model_section(run: RunConfig, source: str, model_path: str, checkpoint) -> tuple[dict, str]:
    """The run config's model section and the label the leaderboard shows for it; the device is the rollout
    workers' (the CPU unless the operator set GPUs aside for them), not the one the run trained on."""
    # a checkpoint and a model directory carry their own tokenizer
    model = {**run.model.model_dump(mode="json"), "tokenizer_path": None}
    if not rollout_cuda_allowed():
        model["device"] = "cpu"
    if source == ModelSource.TINY:
        return {**model, "path": "tiny"}, "tiny"
    if source == ModelSource.PATH:
        return {**model, "path": model_path}, model_path
    return {**model, "path": checkpoint.path}, f"{checkpoint.run.name} @ step {checkpoint.step}"


def evaluation_config_compose(
    *,
    team,
    source: str,
    model_path: str = "",
    checkpoint=None,
    prompt_version=None,
    reward_version=None,
    tool_versions: Sequence = (),
    samples: int = 4,
    temperature: float | None = None,
    max_problems: int | None = None,
    limits: dict[str, int] | None = None,
    seed: int = 0,
) -> tuple[dict[str, Any], str]:
    """(the validated snapshot within the operator's bounds, the model's label); ValidationError keyed by
    config path (`model.path` for a path outside the model roots)."""
    base = checkpoint.run.config if checkpoint is not None else RunConfig().model_dump(mode="json")
    composed = run_config_compose(
        base=base, prompt_version=prompt_version, reward_version=reward_version, tool_versions=tool_versions
    )
    try:
        run = validate_config(composed)
        model, label = _model_section(run, source, model_path, checkpoint)
        sampling = run.sampling.model_dump(mode="json")
        if temperature is not None:
            sampling["temperature"] = temperature
        fields = {
            "model": model,
            "sampling": sampling,
            "limits": {**run.limits.model_dump(mode="json"), **(limits or {})},
        }
        config = eval_config_from_run(
            composed, **fields, data_path="-", samples=samples, max_problems=max_problems, seed=seed
        )
    except ConfigError as exc:
        errors: dict[str, list[str]] = {}
        for path, message in exc.errors:
            errors.setdefault(path or "config", []).append(message)
        raise ValidationError(errors) from None
    snapshot = config.model_dump(mode="json", exclude=WORKER_FIELDS)
    evaluation_config_bound(snapshot, team_id=team.pk, trusted_model=source == ModelSource.CHECKPOINT)
    return snapshot, label


def evaluation_config_bound(snapshot: dict[str, Any], *, team_id: int, trusted_model: bool) -> dict[str, Any]:
    """The snapshot with its model and tool paths checked against the operator's bounds (and resolved), as a
    run's are; a checkpoint's path comes from the team's own run, not from the user, so it is kept."""
    checked = {**snapshot, "model": {**snapshot["model"], "path": "tiny"}} if trusted_model else snapshot
    try:
        bound = run_config_bound(checked, team_id=team_id)
        device = rollout_device(snapshot["model"].get("device", "cpu"), "evaluations")
    except OutOfBounds as exc:
        raise ValidationError(exc.errors) from None
    except ValueError as exc:
        raise ValidationError({"model.device": [str(exc)]}) from None
    model = snapshot["model"] if trusted_model else bound["model"]
    return {**bound, "model": {**model, "device": device}}


def _check_owned(team, *, dataset_version, checkpoint, pins: Sequence) -> None:
    """Defence in depth behind the scoped form: everything the evaluation names is this team's."""
    for version in [dataset_version, *pins]:
        if version is not None and team_id_of(version) != team.pk:
            raise ValidationError({"config": ["A pinned catalog version belongs to another team."]})
    if checkpoint is not None and checkpoint.run.team_id != team.pk:
        raise ValidationError({"checkpoint": ["No such checkpoint among this team's runs."]})


@transaction.atomic
def evaluation_create(
    *,
    team,
    user,
    source: str,
    dataset_version,
    split: str = Split.EVAL,
    name: str = "",
    model_path: str = "",
    checkpoint=None,
    prompt_version=None,
    reward_version=None,
    tool_versions: Sequence = (),
    samples: int = 4,
    temperature: float | None = None,
    max_problems: int | None = None,
    limits: dict[str, int] | None = None,
    seed: int = 0,
    launch: bool = True,
) -> Evaluation:
    """Validate what to evaluate on what, store the snapshot and (by default) queue the evaluation."""
    require_role(user=user, team=team, min_role=Role.MEMBER)
    if source not in ModelSource.values:
        raise ValidationError({"source": [f"Unknown model source {source!r}."]})
    if source == ModelSource.PATH and not model_path:
        raise ValidationError({"model_path": ["Give the model directory to evaluate."]})
    if source == ModelSource.CHECKPOINT and checkpoint is None:
        raise ValidationError({"checkpoint": ["Choose the checkpoint to evaluate."]})
    _check_owned(team, dataset_version=dataset_version, checkpoint=checkpoint,
                 pins=[prompt_version, reward_version, *tool_versions])  # fmt: skip
    if dataset_version.item.kind != DatasetKind.PROMPTS:
        raise ValidationError({"dataset_version": ["Evaluate on a dataset of prompts."]})
    if not _split_count(dataset_version, split):
        raise ValidationError({"split": [f"The {split} split of this dataset version has no rows."]})
    if not 1 <= samples <= SAMPLES_MAX:
        raise ValidationError({"samples": [f"Between 1 and {SAMPLES_MAX} samples per prompt."]})
    snapshot, label = evaluation_config_compose(
        team=team, source=source, model_path=model_path, checkpoint=checkpoint, prompt_version=prompt_version,
        reward_version=reward_version, tool_versions=tool_versions, samples=samples, temperature=temperature,
        max_problems=max_problems, limits=limits, seed=seed,
    )  # fmt: skip
    evaluation = Evaluation(
        team=team,
        created_by=user,
        name=name or f"{label} on {dataset_version.item.name} v{dataset_version.number} ({split})",
        source=source,
        checkpoint=checkpoint,
        run=checkpoint.run if checkpoint is not None else None,
        model_label=label[:300],
        dataset_version=dataset_version,
        split=split,
        prompt_version=prompt_version,
        reward_version=reward_version,
        samples=samples,
        config=snapshot,
    )
    evaluation.full_clean()
    evaluation.save()
    evaluation.tool_versions.set(tool_versions)
    if launch:
        evaluation_launch(evaluation=evaluation)
    return evaluation


def evaluation_launch(*, evaluation: Evaluation) -> None:
    """Enqueue the evaluation on its queue once the row is committed; the task id is known up front. Sent
    by name: the task runs the worker side (execution.py), which the web side need not import."""
    evaluation.celery_task_id = uuid.uuid4().hex
    evaluation.save(update_fields=["celery_task_id"])
    transaction.on_commit(
        lambda: celery_app.send_task(
            EVALUATE_TASK, args=[evaluation.pk], queue=evaluation.queue, task_id=evaluation.celery_task_id
        )
    )
