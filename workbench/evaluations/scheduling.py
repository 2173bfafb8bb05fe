"""Evaluations a run schedules itself (`evaluation.runner: jobs`): when its worker records a checkpoint at
an `evaluation.every_steps` step or at the end (runs/ingest.py hands each new checkpoint to
`evaluations_schedule`: settings.RUNS_CHECKPOINT_SERVICES), that checkpoint is evaluated on the run's
eval split as evaluation jobs on the rollout queue (greedy when `evaluation.greedy`, and k = `pass_k`
samples at the rollout temperature, as the inline evaluator does), so training goes on meanwhile; the
results join the run's `eval/` series at the checkpoint's step, where the dashboard's evaluation chart and
compare read them.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction

from trainers.workbench_api import RunConfig, evaluation_due
from workbench.runs.telemetry.ingest import metrics_ingest

from .models import FINISHED_STATUSES, Evaluation, ModelSource, Split
from .services import evaluation_config_compose, evaluation_launch

logger = logging.getLogger(__name__)
COUNTS = ("problems", "samples", "trajectories")  # bookkeeping, not series
UNNEEDED_STATE = "trainer_state.pt"


def _due(run, step: int) -> bool:
    """Whether the run schedules evaluation jobs for its checkpoint at `step` (the trainers' rule)."""
    config = run.typed_config
    if config.evaluation.runner != "jobs":
        return False
    return evaluation_due(config.evaluation.every_steps, step, last=step == config.training.steps)


def _modes(config: RunConfig) -> list[tuple[str, int, float]]:
    """(mode, k, temperature) of each job, as the inline evaluator samples."""
    modes = [("sampled", config.evaluation.pass_k, config.sampling.temperature or 1.0)]
    if config.evaluation.greedy:
        modes.insert(0, ("greedy", 1, 0.0))
    return modes


@transaction.atomic
def evaluations_schedule(*, checkpoint) -> list[Evaluation]:
    """Queue the evaluations due for this checkpoint of its run (none when not due, already queued, or the
    run has no eval split to evaluate on)."""
    run = checkpoint.run
    if not _due(run, checkpoint.step):
        return []
    version = run.dataset_version
    if version is None or not version.eval_count:
        logger.warning("run %s: evaluation.runner is jobs but its dataset has no eval split", run.pk)
        return []
    if Evaluation.objects.filter(checkpoint=checkpoint, automatic=True).exists():
        return []
    config = run.typed_config
    seed = config.seed + checkpoint.step  # the inline evaluator's seed at this step
    pinned = checkpoint_pin(checkpoint)
    created = []
    for mode, k, temperature in _modes(config):
        snapshot, label = evaluation_config_compose(
            team=run.team, source=ModelSource.CHECKPOINT, checkpoint=checkpoint, samples=k,
            temperature=temperature, max_problems=config.evaluation.max_problems, seed=seed,
        )  # fmt: skip
        if pinned is not None:
            snapshot["model"]["path"] = str(pinned)
        evaluation = Evaluation.objects.create(
            team=run.team, created_by=run.created_by, name=f"{label} ({mode}, every_steps)",
            source=ModelSource.CHECKPOINT, checkpoint=checkpoint, run=run, model_label=label,
            dataset_version=version, split=Split.EVAL, samples=k, config=snapshot, automatic=True, mode=mode,
        )  # fmt: skip
        evaluation_launch(evaluation=evaluation)
        created.append(evaluation)
    return created


def pin_dir(checkpoint_id: int) -> Path:
    return Path(settings.VAR_DIR) / "evaluations" / "checkpoints" / str(checkpoint_id)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(source, target)


def checkpoint_pin(checkpoint) -> Path | None:
    """A copy of the checkpoint's model and tokenizer (hard links: free on the same disk) that the trainer's
    pruning of old checkpoints cannot remove before its evaluations read it. Made where the checkpoint was
    just written (the training worker records it); None when its files are not on this machine."""
    source = Path(checkpoint.path)
    if not (source / "config.json").exists():
        return None
    target = pin_dir(checkpoint.pk)
    if not (target / "config.json").exists():
        partial = target.with_name(f"{target.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        ignore = shutil.ignore_patterns(UNNEEDED_STATE)  # the optimiser's state: evaluation never reads it
        shutil.copytree(source, partial, copy_function=_link_or_copy, ignore=ignore)
        partial.rename(target)
    return target


def checkpoint_unpin(evaluation: Evaluation) -> None:
    """Remove the checkpoint's pinned copy once none of its evaluations still needs it."""
    if evaluation.checkpoint_id is None:
        return
    pending = Evaluation.objects.filter(checkpoint_id=evaluation.checkpoint_id, automatic=True)
    if not pending.exclude(status__in=FINISHED_STATUSES).exists():
        shutil.rmtree(pin_dir(evaluation.checkpoint_id), ignore_errors=True)


def run_series_record(evaluation: Evaluation) -> int:
    """An automatic evaluation's metrics as its run's `eval/<mode>/<metric>` points at the checkpoint step."""
    if not evaluation.automatic or evaluation.run_id is None or evaluation.checkpoint is None:
        return 0
    step, prefix = evaluation.checkpoint.step, f"eval/{evaluation.mode}/"
    points = [
        (step, prefix + key, value)
        for key, value in evaluation.metrics.items()
        if value is not None and key not in COUNTS
    ]
    return metrics_ingest(run_id=evaluation.run_id, points=points, advance_step=False)
