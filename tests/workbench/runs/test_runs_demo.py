"""The demo runs `make run` launches, trained through the worker's code path: the first one learns (reward,
well-formed calculator calls and correct answers rise over its steps, the SFT curriculum streamed before
them, no alert), the second collapses into an echo-trap alert. Both end by themselves."""

from __future__ import annotations

import pytest
import torch
from django.core.management import call_command

from trainers.workbench_api import run_config
from workbench.demo_catalog import seed_demo_catalog
from workbench.runs.execution.worker import run_execute
from workbench.runs.management.commands.seed_demo_runs import COLLAPSE, LEARNING
from workbench.runs.models import MetricPoint, Run, RunStatus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
# Seeds 0 and 1 of the learning run, first five steps -> last five: calls 0.63 -> 0.93 and 0.56 -> 0.88,
# correct answers 0.48 -> 0.70 and 0.10 -> 0.27 (the copying formed later on seed 1).
CALLS_GAIN, ANSWER_GAIN = 0.15, 0.1


@pytest.fixture
def demo_runs(team, member, settings, tmp_path, django_capture_on_commit_callbacks) -> dict[str, Run]:
    settings.MEDIA_ROOT, settings.VAR_DIR = tmp_path / "media", tmp_path / "var"
    torch.set_num_threads(1)
    seed_demo_catalog(team=team, user=member)
    with django_capture_on_commit_callbacks(execute=False) as launched:
        call_command("seed_demo_runs", team=team.name, username=member.username)
        call_command("seed_demo_runs", team=team.name, username=member.username)  # idempotent
    assert len(launched) == 2
    return {run.name: run for run in team.runs.all()}


def series(run: Run, key: str) -> list[float]:
    return list(MetricPoint.objects.filter(run=run, key=key).order_by("step").values_list("value", flat=True))


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_the_first_demo_run_learns_without_an_alert(demo_runs):
    run = demo_runs[LEARNING]
    assert run.sft_dataset_version is not None and run.dataset_version is not None
    assert run_execute(run_id=run.pk, worker="w1", train=run_config) == RunStatus.SUCCEEDED, run.log_tail
    progress = series(run, "sft/progress")
    assert len(progress) == 700 and progress[-1] == 1.0  # 500 tool-only steps, then 200 on the whole mix
    reward, calls = series(run, "reward/mean"), series(run, "tools/calls/calculator")
    answer = series(run, "reward/artist/answer")  # correct answers: the part copying the tool's result earns
    assert len(reward) == run.config["training"]["steps"] == len(calls) == len(answer)
    # the last five steps against the first five: 320 trajectories each (a rate's std there is under 0.03)
    assert mean(reward[-5:]) > mean(reward[:5]) + 0.15, reward
    assert mean(calls[-5:]) > mean(calls[:5]) + CALLS_GAIN, calls
    assert mean(answer[-5:]) > mean(answer[:5]) + ANSWER_GAIN, answer
    evaluated = MetricPoint.objects.filter(run=run, key="eval/sampled/accuracy").order_by("step")
    assert list(evaluated.values_list("step", flat=True)) == [0, 10, 20, 30]  # the Evaluation chart's points
    assert not run.alerts.exists(), list(run.alerts.values("step", "rule", "message"))


def test_the_second_demo_run_collapses_into_an_alert(demo_runs):
    run = demo_runs[COLLAPSE]
    assert run_execute(run_id=run.pk, worker="w1", train=run_config) == RunStatus.SUCCEEDED, run.log_tail
    assert len(series(run, "reward/mean")) == run.config["training"]["steps"]
    assert run.alerts.exists(), series(run, "reward/mean")
