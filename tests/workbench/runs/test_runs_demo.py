"""The demo runs `make run` launches, trained through the worker's code path: the first one learns (reward
and well-formed calculator calls rise over its steps, the SFT stage streamed before them, no alert), the
second collapses into an echo-trap alert. Both end by themselves."""

from __future__ import annotations

import pytest
import torch
from django.core.management import call_command

from trainers.workbench_api import run_config
from workbench.demo_catalog import seed_demo_catalog
from workbench.runs.execution import run_execute
from workbench.runs.management.commands.seed_demo_runs import COLLAPSE, LEARNING
from workbench.runs.models import MetricPoint, Run, RunStatus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


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
    assert len(progress) == 100 and progress[-1] == 1.0  # 400 conversations x 4 epochs, 16 a step
    reward, calls = series(run, "reward/mean"), series(run, "tools/calls/calculator")
    assert len(reward) == run.config["training"]["steps"] == len(calls)
    # the last five steps against the first five: 320 trajectories each
    assert mean(reward[-5:]) > mean(reward[:5]) + 0.15, reward
    assert mean(calls[-5:]) > mean(calls[:5]) + 0.25, calls
    assert not run.alerts.exists(), list(run.alerts.values("step", "rule", "message"))


def test_the_second_demo_run_collapses_into_an_alert(demo_runs):
    run = demo_runs[COLLAPSE]
    assert run_execute(run_id=run.pk, worker="w1", train=run_config) == RunStatus.SUCCEEDED, run.log_tail
    assert len(series(run, "reward/mean")) == run.config["training"]["steps"]
    assert run.alerts.exists(), series(run, "reward/mean")
