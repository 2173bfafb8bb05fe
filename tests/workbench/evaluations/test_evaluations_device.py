"""An evaluation runs on a rollout worker, which claims no GPU: it evaluates on the CPU unless the operator
declares GPUs for the rollout workers (WORKBENCH_ROLLOUT_CUDA), and a snapshot asking for CUDA there
anyway is refused on the worker."""

from __future__ import annotations

from trainers.workbench_api import evaluate_config
from workbench.evaluations.execution import evaluation_execute
from workbench.evaluations.models import Evaluation
from workbench.evaluations.services import evaluation_create


def _create(team, user, checkpoint, prompts) -> Evaluation:
    return evaluation_create(
        team=team, user=user, source="checkpoint", checkpoint=checkpoint, dataset_version=prompts,
        split="train", samples=1, launch=False,
    )  # fmt: skip


def _trained_on_cuda(checkpoint) -> None:
    run = checkpoint.run
    resources = {**run.config.get("resources", {}), "gpus": 1}  # as a run validated on CUDA holds
    run.config = {**run.config, "model": {**run.config["model"], "device": "cuda"}, "resources": resources}
    run.save(update_fields=["config"])


def test_a_cuda_runs_checkpoint_is_evaluated_on_the_rollout_workers_device(
    team, member, checkpoint, prompts, settings
):
    _trained_on_cuda(checkpoint)
    assert _create(team, member, checkpoint, prompts).config["model"]["device"] == "cpu"
    settings.WORKBENCH_ROLLOUT_CUDA = True
    assert _create(team, member, checkpoint, prompts).config["model"]["device"] == "cuda"


def test_the_worker_refuses_an_evaluation_on_cuda(team, member, checkpoint, prompts):
    evaluation = _create(team, member, checkpoint, prompts)
    config = {**evaluation.config, "model": {**evaluation.config["model"], "device": "cuda"}}
    Evaluation.objects.filter(pk=evaluation.pk).update(config=config)
    assert evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) == "failed"
    evaluation.refresh_from_db()
    assert "model.device" in evaluation.error and "WORKBENCH_ROLLOUT_CUDA" in evaluation.error
