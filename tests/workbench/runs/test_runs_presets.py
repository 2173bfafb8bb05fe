"""Every preset launched from the browser with the demo catalog either trains on the worker (its first RL
step, and its SFT stage before it, run through the worker's code path) or is refused at the form with a
message naming what it lacks. Steps are tiny: one step of 2 prompts x 2 samples."""

from __future__ import annotations

import pytest
import torch
from django.urls import reverse

from trainers.config import PRESETS, preset_config
from trainers.workbench_api import run_config
from workbench import demo_catalog
from workbench.datasets.models import Dataset
from workbench.runs.execution.worker import run_execute
from workbench.runs.models import MetricPoint, Run, RunStatus

from .test_runs_views import form_post

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TINY = {
    "training.steps": 1,
    "training.minibatch_size": None,
    "rollout.prompts_per_step": 2,
    "rollout.samples_per_prompt": 2,
    "limits.max_new_tokens_per_turn": 8,
    "sft.epochs": 1,
}


@pytest.fixture(autouse=True)
def _isolated(settings, tmp_path):
    settings.MEDIA_ROOT, settings.VAR_DIR = tmp_path / "media", tmp_path / "var"
    torch.set_num_threads(1)


@pytest.fixture
def catalog(team, member) -> dict[str, int]:
    demo_catalog.seed_demo_catalog(team=team, user=member)

    def latest(name: str) -> int:
        return Dataset.objects.get(team=team, name=name).latest_version().pk

    return {
        "dataset_version": latest(demo_catalog.DATASET_NAME),
        "sft_dataset_version": latest(demo_catalog.SFT_DATASET_NAME),
    }


def tiny_preset(name: str) -> dict:
    overrides = {
        k: v for k, v in TINY.items() if not k.startswith("sft.") or PRESETS.get(name).overrides.get("sft")
    }
    return preset_config(name, **overrides).model_dump(mode="json")


def launch(client, preset: str, **pins):
    return client.post(
        reverse("runs:create") + f"?preset={preset}", form_post(tiny_preset(preset), name=preset, **pins)
    )


@pytest.mark.parametrize("preset", sorted(PRESETS.names()))
def test_each_preset_launched_with_the_demo_catalog_trains(
    client_for, member, catalog, preset, django_capture_on_commit_callbacks
):
    needs_sft = tiny_preset(preset)["sft"] is not None
    pins = {"dataset_version": catalog["dataset_version"]}
    if needs_sft:
        pins["sft_dataset_version"] = catalog["sft_dataset_version"]
    with django_capture_on_commit_callbacks(execute=False):
        response = launch(client_for(member), preset, **pins)
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get(name=preset)
    assert run_execute(run_id=run.pk, worker="w1", train=run_config) == RunStatus.SUCCEEDED, run.log_tail
    points = MetricPoint.objects.filter(run=run)
    assert list(points.filter(key="reward/mean").values_list("step", flat=True)) == [1]
    sft_steps = list(points.filter(key="sft/loss").order_by("step").values_list("step", flat=True))
    assert sft_steps == (list(range(1, 64)) if needs_sft else [])  # 1000 conversations, 16 a step


@pytest.mark.parametrize("preset", sorted(PRESETS.names()))
def test_each_preset_says_at_the_form_what_it_lacks(client_for, member, catalog, preset):
    client = client_for(member)
    response = launch(client, preset)  # nothing pinned
    errors = response.context["form"].errors
    assert response.status_code == 400 and "Pin a dataset of prompts" in errors["dataset_version"][0]
    if tiny_preset(preset)["sft"] is not None:
        response = launch(client, preset, dataset_version=catalog["dataset_version"])
        assert response.status_code == 400
        assert "pin a conversations dataset" in response.context["form"].errors["sft_dataset_version"][0]
    assert not Run.objects.exists()
