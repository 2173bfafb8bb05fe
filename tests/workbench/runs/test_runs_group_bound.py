"""The rollouts of a step (rollout.prompts_per_step x rollout.samples_per_prompt) are bounded by the
operator's WORKBENCH_MAX_ROLLOUTS_PER_STEP: a run past it is refused at launch, whether it comes from the
form's fields, a pasted YAML or a service call, and again on the worker; the form shows the bound."""

from __future__ import annotations

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.workbench.support.datasets import prompts_version
from trainers.config import RunConfig
from workbench.runs.config.bounds import OutOfBounds, run_config_bound
from workbench.runs.models import Run
from workbench.runs.services import run_create

from .test_runs_views import form_post

GROUP = ("rollout.prompts_per_step", "rollout.samples_per_prompt")


def rollout(prompts: int, samples: int) -> dict:
    return {"rollout": {"prompts_per_step": prompts, "samples_per_prompt": samples}}


def create(team, user, config: dict) -> Run:
    rows = prompts_version(team, user)
    return run_create(
        team=team, user=user, name="r", config=config, queue="cpu", launch=False, dataset_version=rows
    )


def test_the_reported_group_of_100000_is_refused_at_both_fields(team, member):
    with pytest.raises(ValidationError) as caught:
        create(team, member, rollout(8, 100_000))
    errors = caught.value.message_dict
    assert set(errors) == set(GROUP) and not Run.objects.exists()
    assert "800000" in errors["rollout.samples_per_prompt"][0]
    assert "WORKBENCH_MAX_ROLLOUTS_PER_STEP" in errors["rollout.samples_per_prompt"][0]


def test_the_operator_sets_the_maximum(team, member, settings):
    settings.WORKBENCH_MAX_ROLLOUTS_PER_STEP = 32
    with pytest.raises(ValidationError):
        create(team, member, rollout(4, 9))
    assert create(team, member, rollout(4, 8)).config["rollout"]["samples_per_prompt"] == 8


def test_the_worker_refuses_a_stored_config_past_the_bound(team, settings):
    settings.WORKBENCH_MAX_ROLLOUTS_PER_STEP = 16
    config = RunConfig(**rollout(4, 8)).model_dump(mode="json")
    with pytest.raises(OutOfBounds) as caught:
        run_config_bound(config, team_id=team.pk)
    assert set(caught.value.errors) == set(GROUP)


def test_a_pasted_yaml_past_the_bound_is_refused_at_the_group_field(client_for, team, member):
    data = {
        **form_post(RunConfig().model_dump(mode="json"), dataset_version=prompts_version(team, member).pk),
        "config_yaml": yaml.safe_dump(rollout(8, 100_000)),
    }
    response = client_for(member).post(reverse("runs:create"), data)
    assert response.status_code == 400 and not Run.objects.exists()
    form = response.context["form"]
    assert "WORKBENCH_MAX_ROLLOUTS_PER_STEP" in form.errors["rollout.samples_per_prompt"][0]
    assert form["rollout.samples_per_prompt"].value() == "100000"  # the pasted value, shown on its field


def test_the_form_shows_the_bound_on_both_fields(client_for, member, settings):
    settings.WORKBENCH_MAX_ROLLOUTS_PER_STEP = 1024
    form = client_for(member).get(reverse("runs:create")).context["form"]
    for path in GROUP:
        assert "prompts_per_step × samples_per_prompt ≤ 1024" in form[path].help_text
        assert "WORKBENCH_MAX_ROLLOUTS_PER_STEP" in form[path].help_text
