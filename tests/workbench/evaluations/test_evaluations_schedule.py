"""evaluation.runner "jobs": a run's checkpoint at an every_steps step (or the last) queues its evaluations on
the rollout queue (greedy and k samples, as the inline evaluator), and their metrics join the run's eval/
series at that step, where the dashboard's evaluation chart and compare read them."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.files.base import ContentFile

from trainers.config import RunConfig
from trainers.workbench_api import evaluate_config
from workbench.evaluations.execution import evaluation_execute
from workbench.evaluations.models import Evaluation
from workbench.runs.models import MetricPoint, Run
from workbench.runs.telemetry.ingest import checkpoint_record
from workbench.runs.telemetry.series import series_keys

LIMITS = {"max_turns": 1, "max_new_tokens_per_turn": 6}


@pytest.fixture
def split_prompts(team, member):
    """Prompts with an eval split (half of six rows)."""
    from workbench.datasets.services import dataset_upload_create

    rows = [{"question": f"What is {i} + 2?", "answer": str(i + 2)} for i in range(6)]
    content = "".join(json.dumps(row) + "\n" for row in rows).encode()
    upload = dataset_upload_create(
        team=team, user=member, name="split", kind="prompts", file=ContentFile(content, name="split.jsonl"),
        eval_ratio=0.5, process_now=True,
    )  # fmt: skip
    assert upload.version is not None and upload.version.eval_count == 3, upload.errors
    return upload.version


def _run(team, member, version, **evaluation) -> Run:
    config = RunConfig(
        seed=5, limits=LIMITS, sampling={"temperature": 0.7}, training={"steps": 5},
        evaluation={"every_steps": 2, "pass_k": 2, "runner": "jobs", **evaluation},
    ).model_dump(mode="json")  # fmt: skip
    return Run.objects.create(team=team, created_by=member, name="r", config=config, dataset_version=version)


def _checkpoint(run, step, path, capture) -> list[Evaluation]:
    """Record a checkpoint as the worker's sink does, then run what it scheduled on commit (the launches
    are captured, not sent: the test executes the evaluations itself)."""
    with capture(execute=False) as scheduled:
        checkpoint_record(run_id=run.pk, step=step, path=str(path))
    with capture(execute=False) as launches:
        for callback in scheduled:
            callback()
    created = list(Evaluation.objects.filter(checkpoint__run=run, checkpoint__step=step).order_by("id"))
    assert len(launches) == len(created)
    return created


def test_checkpoints_at_every_steps_queue_greedy_and_sampled_evaluations(
    team, member, split_prompts, tiny_checkpoint_dir, django_capture_on_commit_callbacks
):
    run = _run(team, member, split_prompts)
    assert _checkpoint(run, 1, tiny_checkpoint_dir, django_capture_on_commit_callbacks) == []
    greedy, sampled = _checkpoint(run, 2, tiny_checkpoint_dir, django_capture_on_commit_callbacks)
    assert (greedy.mode, greedy.samples, greedy.config["sampling"]["temperature"]) == ("greedy", 1, 0.0)
    assert (sampled.mode, sampled.samples, sampled.config["sampling"]["temperature"]) == ("sampled", 2, 0.7)
    for evaluation in (greedy, sampled):
        assert evaluation.automatic and evaluation.split == "eval" and evaluation.queue == "rollout"
        assert evaluation.config["seed"] == 7 and evaluation.celery_task_id  # the run's seed + step
    assert len(_checkpoint(run, 5, tiny_checkpoint_dir, django_capture_on_commit_callbacks)) == 2  # the last

    for evaluation in (greedy, sampled):
        assert (
            evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config)
            == "succeeded"
        )
    points = dict(MetricPoint.objects.filter(run=run, step=2).values_list("key", "value"))
    sampled.refresh_from_db()
    assert points["eval/sampled/accuracy"] == pytest.approx(sampled.metrics["accuracy"])
    assert points["eval/sampled/pass@2"] == pytest.approx(sampled.metrics["pass@2"])
    assert "eval/greedy/accuracy" in points and "eval/sampled/trajectories" not in points
    assert {"eval/greedy/accuracy", "eval/sampled/pass@2"} <= set(series_keys(run=run))
    run.refresh_from_db()
    assert run.last_step is None  # evaluations do not move the run's training step


def test_inline_runs_and_runs_without_an_eval_split_schedule_nothing(
    team, member, split_prompts, prompts, tiny_checkpoint_dir, django_capture_on_commit_callbacks
):
    inline = _run(team, member, split_prompts, runner="inline")
    assert _checkpoint(inline, 2, tiny_checkpoint_dir, django_capture_on_commit_callbacks) == []
    no_eval_rows = _run(team, member, prompts)
    assert _checkpoint(no_eval_rows, 2, tiny_checkpoint_dir, django_capture_on_commit_callbacks) == []
    assert not Evaluation.objects.exists()


def test_a_checkpoint_pruned_before_its_evaluations_ran_is_read_from_its_pinned_copy(
    team, member, split_prompts, tiny_checkpoint_dir, tmp_path, django_capture_on_commit_callbacks
):
    from workbench.evaluations.scheduling import pin_dir

    written = shutil.copytree(tiny_checkpoint_dir, tmp_path / "run" / "checkpoints" / "step_000002")
    run = _run(team, member, split_prompts)
    greedy, sampled = _checkpoint(run, 2, written, django_capture_on_commit_callbacks)
    pinned = pin_dir(greedy.checkpoint_id)
    assert greedy.config["model"]["path"] == str(pinned) and (pinned / "model.safetensors").exists()
    assert not (pinned / "trainer_state.pt").exists()  # the optimiser's state is not copied
    shutil.rmtree(written)  # the trainer keeps only its newest checkpoints
    assert evaluation_execute(evaluation_id=greedy.pk, worker="w", evaluate=evaluate_config) == "succeeded"
    assert pinned.exists()  # the sampled evaluation still needs it
    assert evaluation_execute(evaluation_id=sampled.pk, worker="w", evaluate=evaluate_config) == "succeeded"
    assert not pinned.exists()
