"""The worker side of an evaluation: claim it, export the split's rows, evaluate with the trainers'
`evaluate_config` and store the metrics and every trajectory."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from trainers.workbench_api import EvalConfig, Trajectory, eval_metrics_finite
from workbench.datasets.export import write_split_rows
from workbench.runs.execution.artifacts import artifact_store, checkpoint_local
from workbench.runs.trajectories.records import TRAJECTORY_FIELDS, trajectory_record

from .models import Evaluation, EvaluationStatus, EvaluationTrajectory, ModelSource
from .scheduling import checkpoint_unpin, run_series_record
from .services import evaluation_config_bound

logger = logging.getLogger(__name__)
STORED_FIELDS = [field for field in TRAJECTORY_FIELDS if field != "advantage"]


def evaluation_dir(evaluation: Evaluation) -> Path:
    """Where the worker keeps the evaluation's files (the exported rows, the tiny model)."""
    return Path(settings.VAR_DIR) / "evaluations" / str(evaluation.pk)


@transaction.atomic
def evaluation_claim(*, evaluation_id: int, worker: str, redelivered: bool = False) -> Evaluation | None:
    """Mark a queued evaluation running; None when it is gone, finished, or another delivery has it. A
    redelivered message (its worker died mid-evaluation: acks_late) takes a running one over and starts it
    again; what it stores replaces what the lost attempt stored."""
    evaluation = Evaluation.objects.select_for_update().filter(pk=evaluation_id).first()
    takes_over = redelivered and evaluation is not None and evaluation.status == EvaluationStatus.RUNNING
    if evaluation is None or (evaluation.status != EvaluationStatus.QUEUED and not takes_over):
        return None
    evaluation.status, evaluation.worker, evaluation.started_at = (
        EvaluationStatus.RUNNING,
        worker,
        timezone.now(),
    )
    evaluation.save(update_fields=["status", "worker", "started_at"])
    return evaluation


def _export_rows(evaluation: Evaluation, directory: Path) -> str:
    """The split's rows as the JSONL the trainers read (the fields a run's export writes)."""
    path = directory / f"{evaluation.split}.jsonl"
    return str(write_split_rows(evaluation.dataset_version, evaluation.split, path))


def _checkpoint_local(evaluation: Evaluation, directory: Path) -> Path:
    """Where this worker reads the evaluated checkpoint: a scheduled evaluation's pinned copy or the path its
    run's worker wrote, else a copy from the artifact store (downloaded into the evaluation's directory), as
    a resumed run finds it."""
    pinned = Path(evaluation.config["model"]["path"])
    if evaluation.automatic and (pinned / "config.json").exists():
        return pinned
    checkpoint = evaluation.checkpoint
    local = (
        None
        if checkpoint is None
        else checkpoint_local(checkpoint, run_dir=directory, store=artifact_store())
    )
    if local is None:
        where = checkpoint.url or checkpoint.path if checkpoint is not None else evaluation.model_label
        raise FileNotFoundError(
            f"the checkpoint's files ({where}) are not readable here nor in the artifact store"
        )
    return local


def execution_config(evaluation: Evaluation) -> EvalConfig:
    """The snapshot within the operator's bounds (checked again on the worker), its rows and directory."""
    trusted = evaluation.source == ModelSource.CHECKPOINT
    snapshot = evaluation_config_bound(evaluation.config, team_id=evaluation.team_id, trusted_model=trusted)
    directory = evaluation_dir(evaluation)
    directory.mkdir(parents=True, exist_ok=True)
    if trusted:
        snapshot["model"] = {**snapshot["model"], "path": str(_checkpoint_local(evaluation, directory))}
    data = {"data_path": _export_rows(evaluation, directory), "prompt_key": "question"}
    return EvalConfig.model_validate({**snapshot, **data, "output_dir": str(directory)})


@transaction.atomic
def trajectories_store(*, evaluation: Evaluation, trajectories: list[Trajectory]) -> int:
    """Store each trajectory with the columns a run's inspector filters on (cleaned as a run's are)."""
    records = []
    for traj in trajectories:
        record = trajectory_record(run_id=0, step=0, traj=traj)
        fields = {field: getattr(record, field) for field in STORED_FIELDS}
        records.append(EvaluationTrajectory(evaluation=evaluation, key=record.key, **fields))
    EvaluationTrajectory.objects.bulk_create(
        records, batch_size=500, update_conflicts=True, unique_fields=["evaluation", "key"],
        update_fields=STORED_FIELDS,
    )  # fmt: skip
    return len(records)


def _finish(evaluation: Evaluation, status: str, **fields: Any) -> None:
    Evaluation.objects.filter(pk=evaluation.pk).update(status=status, finished_at=timezone.now(), **fields)


def evaluation_execute(
    *, evaluation_id: int, worker: str, evaluate: Callable[..., Any], redelivered: bool = False
) -> str | None:
    """Run one delivery of an evaluation; returns its final status (None when there was nothing to do)."""
    evaluation = evaluation_claim(evaluation_id=evaluation_id, worker=worker, redelivered=redelivered)
    if evaluation is None:
        return None
    try:
        metrics, trajectories = evaluate(execution_config(evaluation))
        trajectories_store(evaluation=evaluation, trajectories=trajectories)
    except Exception as exc:
        logger.exception("evaluation %s failed", evaluation.pk)
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _finish(evaluation, EvaluationStatus.FAILED, error=error[-20_000:])
        checkpoint_unpin(evaluation)
        return EvaluationStatus.FAILED
    _finish(evaluation, EvaluationStatus.SUCCEEDED, metrics=eval_metrics_finite(metrics))
    evaluation.refresh_from_db()
    run_series_record(evaluation)
    checkpoint_unpin(evaluation)
    return EvaluationStatus.SUCCEEDED
