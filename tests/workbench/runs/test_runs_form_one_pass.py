"""A failed submit of the new-run form says everything at once: the form's own checks, the trainers
validation, the operator's bounds and the missing catalog pins, each on its field, with what was typed
kept; the section summaries then name only values that differ from their defaults."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from trainers.config import RunConfig
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.runs.web.forms import RunForm

from .test_runs_views import form_post

URL = reverse("runs:create")


def test_every_bad_field_is_named_in_one_submit(client_for, member, settings):
    settings.WORKBENCH_MAX_RANKS = 2
    config = RunConfig().model_dump(mode="json")
    config["training"]["steps"] = 0  # the form's own minimum
    config["optimizer"]["lr"] = -0.5  # only the trainers validation catches it
    config["training"]["engine"], config["training"]["deepspeed"]["ranks"] = "deepspeed", 3  # a bound
    data = form_post(config, notes="kept notes", tags="a, b")  # and no dataset pinned
    response = client_for(member).post(URL, data)
    errors = response.context["form"].errors
    assert response.status_code == 400 and not Run.objects.exists()
    assert set(errors) == {"training.steps", "optimizer.lr", "training.deepspeed.ranks", "dataset_version"}
    assert "WORKBENCH_MAX_RANKS" in errors["training.deepspeed.ranks"][0]
    assert errors["dataset_version"] == ["Pin a dataset of prompts: RL trains on its rows."]
    body = response.content.decode()
    for path in errors:  # each shown next to its own field
        assert f'<div class="field has-error" data-path="{path}">' in body


def test_the_service_names_every_refusal_at_once(team, member):
    """What a config given as YAML or through the service meets: every check, not the first that fails."""
    config = {"optimizer": {"lr": -1}, "rollout": {"prompts_per_step": 8, "samples_per_prompt": 100_000}}
    with pytest.raises(ValidationError) as caught:
        run_create(team=team, user=member, name="r", config=config, queue="nowhere", launch=False)
    assert set(caught.value.message_dict) == {
        "queue",
        "optimizer.lr",
        "rollout.prompts_per_step",
        "rollout.samples_per_prompt",
        "dataset_version",
    }


def test_what_was_typed_comes_back_after_a_failed_submit(client_for, member):
    config = RunConfig().model_dump(mode="json")
    config["training"]["steps"], config["optimizer"]["lr"] = 0, -0.5
    config["rollout"]["samples_per_prompt"], config["model"]["tokenizer_path"] = 6, "/x/tok"
    data = form_post(config, name="typed name", notes="kept notes", tags="a, b")
    form: RunForm = client_for(member).post(URL, data).context["form"]
    for name in ("name", "notes", "tags", "training.steps", "optimizer.lr", "rollout.samples_per_prompt"):
        assert str(form[name].value()) == str(data[name]), name
    assert form["model.tokenizer_path"].value() == "/x/tok"


def test_a_pasted_yaml_that_does_not_parse_is_the_only_error(client_for, member):
    """The posted fields were not what the user meant to launch: they are not checked against it."""
    data = {**form_post(RunConfig().model_dump(mode="json")), "config_yaml": "training: [unclosed"}
    response = client_for(member).post(URL, data)
    assert set(response.context["form"].errors) == {"config_yaml"}


def test_summaries_after_a_failed_submit_name_only_real_changes(client_for, member):
    config = RunConfig().model_dump(mode="json")
    config["algorithm"]["eps"] = 0.0
    response = client_for(member).post(URL, form_post(config))  # refused: eps, and no dataset pinned
    assert response.status_code == 400
    summaries = {s.name: s.summary for s in response.context["form"].sections()}
    assert summaries.pop("algorithm") == "eps=0"
    assert {name: text for name, text in summaries.items() if text} == {}


def test_a_refused_value_is_not_refused_again_for_the_default_that_stood_in(team, member):
    """prompts_per_step 0 is invalid; the bound is then checked with its default (8 x 100000) and names
    samples_per_prompt, but not prompts_per_step a second time."""
    config = {"rollout": {"prompts_per_step": 0, "samples_per_prompt": 100_000}}
    with pytest.raises(ValidationError) as caught:
        run_create(team=team, user=member, name="r", config=config, queue="cpu", launch=False)
    errors = caught.value.message_dict
    [invalid] = errors["rollout.prompts_per_step"]
    assert "greater than or equal" in invalid
    assert "WORKBENCH_MAX_ROLLOUTS_PER_STEP" in errors["rollout.samples_per_prompt"][0]
