"""Evaluations: the Evaluate form and its errors, team scoping, the worker side on a real checkpoint (the
trainers' evaluate_config, in process), the stored trajectories in the inspector, the leaderboard and CSV."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from django.urls import reverse

from trainers.workbench_api import evaluate_config
from workbench.evaluations.execution import evaluation_execute
from workbench.evaluations.models import Evaluation, EvaluationStatus
from workbench.evaluations.services import evaluation_create
from workbench.jobs.queues import TASK_ROUTES


def _post(checkpoint=None, prompts=None, **fields) -> dict:
    data = {"source": "checkpoint", "split": "train", "samples": "2", "seed": "0"}
    if checkpoint is not None:
        data["checkpoint"] = str(getattr(checkpoint, "pk", checkpoint))
    if prompts is not None:
        data["dataset_version"] = str(prompts.pk)
    return {**data, **fields}


def _create(team, user, checkpoint, prompts, **fields):
    kwargs = {"source": "checkpoint", "checkpoint": checkpoint, "dataset_version": prompts, "split": "train",
              "samples": 2, "launch": False, **fields}  # fmt: skip
    return evaluation_create(team=team, user=user, **kwargs)


def test_the_task_goes_to_the_rollout_queue():
    from celery.app.routes import MapRoute

    route = MapRoute(TASK_ROUTES)("workbench.evaluations.tasks.rollout_evaluate", (), {}, {})
    assert route == {"queue": "rollout"}


def test_form_from_a_run_page_is_prefilled_with_the_checkpoint(client_for, member, checkpoint):
    body = (
        client_for(member)
        .get(reverse("evaluations:create") + f"?checkpoint={checkpoint.pk}")
        .content.decode()
    )
    assert f'<option value="{checkpoint.pk}" selected>trained @ step 2</option>' in body


def test_posting_the_form_queues_an_evaluation_of_the_checkpoint(
    client_for, member, team, checkpoint, prompts
):
    response = client_for(member).post(reverse("evaluations:create"), _post(checkpoint, prompts))
    evaluation = Evaluation.objects.get()
    assert response.status_code == 302 and response.url == evaluation.get_absolute_url()
    assert (evaluation.team, evaluation.run, evaluation.status) == (
        team,
        checkpoint.run,
        EvaluationStatus.QUEUED,
    )
    assert evaluation.model_label == "trained @ step 2" and evaluation.celery_task_id
    assert evaluation.config["model"]["path"] == checkpoint.path
    assert evaluation.config["limits"]["max_new_tokens_per_turn"] == 6  # the run's own limits
    assert evaluation.config["samples"] == 2 and "data_path" not in evaluation.config


def test_another_teams_checkpoint_is_a_form_error(client_for, member, other_checkpoint, prompts):
    response = client_for(member).post(reverse("evaluations:create"), _post(other_checkpoint, prompts))
    assert response.status_code == 400 and "No such checkpoint among your team" in response.content.decode()
    response = client_for(member).post(reverse("evaluations:create"), _post(prompts=prompts, checkpoint="x"))
    assert response.status_code == 400
    assert not Evaluation.objects.exists()


def test_a_path_outside_the_model_roots_is_a_form_error(client_for, member, prompts, tmp_path):
    data = _post(prompts=prompts, source="path", model_path="/etc")
    response = client_for(member).post(reverse("evaluations:create"), data)
    body = response.content.decode()
    assert response.status_code == 400 and "outside what the operator allows" in body
    assert 'data-path="model_path"' in body and "WORKBENCH_MODEL_ROOTS" in body
    data["model_path"] = str(tmp_path / "models" / ".." / "elsewhere")  # resolved before it is checked
    assert client_for(member).post(reverse("evaluations:create"), data).status_code == 400
    assert not Evaluation.objects.exists()


def test_an_empty_split_and_a_missing_checkpoint_are_form_errors(client_for, member, checkpoint, prompts):
    response = client_for(member).post(
        reverse("evaluations:create"), _post(checkpoint, prompts, split="eval")
    )
    assert (
        response.status_code == 400
        and "eval split of this dataset version has no rows" in response.content.decode()
    )
    response = client_for(member).post(reverse("evaluations:create"), _post(prompts=prompts))
    assert response.status_code == 400 and "Choose the checkpoint to evaluate." in response.content.decode()


def test_viewers_cannot_launch(client_for, viewer):
    assert client_for(viewer).get(reverse("evaluations:create")).status_code == 403


def test_the_worker_evaluates_the_checkpoint_and_stores_its_trajectories(
    client_for, member, outsider, team, checkpoint, prompts
):
    evaluation = _create(team, member, checkpoint, prompts)
    assert (
        evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) == "succeeded"
    )
    evaluation.refresh_from_db()
    metrics, trajectories = evaluation.metrics, list(evaluation.trajectories.all())
    assert evaluation.status == EvaluationStatus.SUCCEEDED and evaluation.finished_at is not None
    assert len(trajectories) == 6 == metrics["trajectories"]  # 3 prompts, k = 2
    assert {t.group_id for t in trajectories} == {"row0", "row1", "row2"}
    assert all(t.length > 0 and t.correct is not None for t in trajectories)
    assert metrics["accuracy"] == pytest.approx(sum(t.correct for t in trajectories) / 6)
    assert metrics["response_length"] == pytest.approx(sum(t.length for t in trajectories) / 6)
    for key in ("pass@2", "pass@1", "tool_call_rate", "failed_calls_per_traj", "reward_mean"):
        assert key in metrics
    assert evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) is None

    client = client_for(member)
    body = client.get(evaluation.get_absolute_url()).content.decode()
    assert 'data-metric="accuracy"' in body and body.count('class="answer"') == 6
    record = trajectories[0]
    page = client.get(reverse("evaluations:trajectory", args=[evaluation.pk, record.pk])).content.decode()
    assert 'class="turns"' in page and "role-assistant" in page
    assert f"What is {int(record.group_id[3:])} + 2?" in page  # the prompt the model saw
    other = client_for(outsider)
    assert other.get(evaluation.get_absolute_url()).status_code == 404
    assert other.get(reverse("evaluations:trajectory", args=[evaluation.pk, record.pk])).status_code == 404
    assert other.get(reverse("evaluations:leaderboard", args=[prompts.pk])).status_code == 404


def test_a_missing_checkpoint_fails_with_its_reason(member, team, checkpoint, prompts, tmp_path):
    evaluation = _create(team, member, checkpoint, prompts)
    type(checkpoint).objects.filter(pk=checkpoint.pk).update(path=str(tmp_path / "gone"), url="")
    assert evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) == "failed"
    evaluation.refresh_from_db()
    assert "not readable here" in evaluation.error and evaluation.finished_at is not None


def test_a_checkpoint_only_in_the_artifact_store_is_downloaded(
    member, team, checkpoint, prompts, settings, tmp_path
):
    from trainers.workbench_api import ArtifactStore

    settings.ARTIFACTS_URL = str(tmp_path / "store")
    url = ArtifactStore.from_url(settings.ARTIFACTS_URL).put_dir(
        Path(checkpoint.path), "runs/1/checkpoints/step_000002"
    )
    type(checkpoint).objects.filter(pk=checkpoint.pk).update(path=str(tmp_path / "other-worker"), url=url)
    evaluation = _create(team, member, checkpoint, prompts, max_problems=1)
    assert (
        evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) == "succeeded"
    )
    assert evaluation.trajectories.count() == 2


def _finished(team, user, checkpoint, prompts, **metrics):
    evaluation = _create(team, user, checkpoint, prompts)
    from django.utils import timezone

    Evaluation.objects.filter(pk=evaluation.pk).update(
        status=EvaluationStatus.SUCCEEDED, metrics=metrics, finished_at=timezone.now()
    )
    return evaluation


def test_leaderboard_sorts_every_column_and_exports_csv(
    client_for, member, team, checkpoint, prompts, other_checkpoint
):
    from tests.workbench.evaluations.conftest import make_run_with_checkpoint

    second = make_run_with_checkpoint(team, member, checkpoint.path, name="later", step=4)
    low = _finished(
        team, member, checkpoint, prompts, accuracy=0.25, **{"pass@2": 0.5, "response_length": 9.0}
    )
    high = _finished(team, member, second, prompts, accuracy=0.75, **{"pass@2": 0.9, "response_length": 3.0})
    unscored = _finished(team, member, checkpoint, prompts, **{"pass@2": 0.1})
    _create(team, member, checkpoint, prompts)  # queued: not on the leaderboard
    client = client_for(member)
    url = reverse("evaluations:leaderboard", args=[prompts.pk])

    def order(sort: str) -> list[int]:
        body = client.get(url, {"sort": sort}).content.decode()
        return [
            e.pk for e in sorted((low, high, unscored), key=lambda e: body.index(f'data-evaluation="{e.pk}"'))
        ]

    assert order("-accuracy") == [high.pk, low.pk, unscored.pk]  # without a value: last
    assert order("accuracy") == [low.pk, high.pk, unscored.pk]
    assert order("-pass_at_k") == [high.pk, low.pk, unscored.pk]
    assert order("length")[:2] == [high.pk, low.pk]
    assert order("nonsense") == order("-accuracy")
    body = client.get(url).content.decode()
    assert "later @ step 4" in body and "trained @ step 2" in body

    response = client.get(url, {"sort": "-accuracy", "format": "csv"})
    assert response["Content-Type"] == "text/csv" and "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [int(r["evaluation_id"]) for r in rows] == [high.pk, low.pk, unscored.pk]
    assert (
        rows[0]["model"] == "later @ step 4"
        and float(rows[0]["pass_at_k"]) == 0.9
        and rows[2]["accuracy"] == ""
    )

    listing = client.get(reverse("evaluations:list")).content.decode()
    assert url in listing and "3 evaluations" in listing


def test_a_run_page_links_each_checkpoint_to_a_prefilled_evaluate_form(
    client_for, member, viewer, checkpoint
):
    link = f"{reverse('evaluations:create')}?checkpoint={checkpoint.pk}"
    assert link in client_for(member).get(checkpoint.run.get_absolute_url()).content.decode()
    assert link not in client_for(viewer).get(checkpoint.run.get_absolute_url()).content.decode()


def test_a_redelivered_evaluation_takes_over_the_lost_attempt(member, team, checkpoint, prompts):
    evaluation = _create(team, member, checkpoint, prompts, max_problems=1)
    Evaluation.objects.filter(pk=evaluation.pk).update(status=EvaluationStatus.RUNNING, worker="dead")
    assert evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config) is None
    run = evaluation_execute(
        evaluation_id=evaluation.pk, worker="w2", evaluate=evaluate_config, redelivered=True
    )
    evaluation.refresh_from_db()
    assert run == "succeeded" and evaluation.worker == "w2" and evaluation.trajectories.count() == 2
    finished = evaluation_execute(
        evaluation_id=evaluation.pk, worker="w3", evaluate=evaluate_config, redelivered=True
    )
    assert finished is None  # a finished evaluation is never run again


def test_leaderboard_csv_quotes_names_a_spreadsheet_would_run(client_for, member, team, checkpoint, prompts):
    evaluation = _finished(team, member, checkpoint, prompts, accuracy=0.5, reward_mean=-0.25)
    Evaluation.objects.filter(pk=evaluation.pk).update(name='=HYPERLINK("http://x")')
    response = client_for(member).get(
        reverse("evaluations:leaderboard", args=[prompts.pk]), {"format": "csv"}
    )
    row = next(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["name"] == '\'=HYPERLINK("http://x")' and float(row["reward"]) == -0.25


def test_the_tiny_model_and_a_directory_under_the_model_roots_are_evaluated(
    member, team, prompts, tiny_checkpoint_dir, tmp_path
):
    inside = shutil.copytree(tiny_checkpoint_dir, tmp_path / "models" / "mine")
    limits = {"max_turns": 1, "max_new_tokens_per_turn": 4}
    common = {"team": team, "user": member, "dataset_version": prompts, "split": "train", "samples": 1,
              "max_problems": 1, "limits": limits, "launch": False}  # fmt: skip
    from_dir = evaluation_create(source="path", model_path=str(inside), **common)
    tiny = evaluation_create(source="tiny", **common)
    assert (from_dir.model_label, tiny.model_label) == (str(inside), "tiny")
    for evaluation in (from_dir, tiny):
        assert (
            evaluation_execute(evaluation_id=evaluation.pk, worker="w", evaluate=evaluate_config)
            == "succeeded"
        )
        assert evaluation.trajectories.count() == 1


def test_whole_counts_read_as_whole_numbers_on_the_evaluation_and_the_leaderboard(
    client_for, member, team, checkpoint, prompts
):
    """Counts are stored as floats with the metrics (problems 10.0): the pages write 10, not 10.0000;
    a share keeps its decimals."""
    evaluation = _finished(team, member, checkpoint, prompts, accuracy=0.25, problems=10.0, samples=2.0)
    client = client_for(member)
    body = client.get(evaluation.get_absolute_url()).content.decode()
    assert '<dd data-metric="problems">10</dd>' in body and '<dd data-metric="samples">2</dd>' in body
    assert '<dd data-metric="accuracy">0.2500</dd>' in body
    board = client.get(reverse("evaluations:leaderboard", args=[prompts.pk])).content.decode()
    assert "<td>10</td>" in board and "10.000" not in board and "<td>0.250</td>" in board
