"""The new-run form: what people change leads, other sections are collapsed with a summary of their
non-default values and open on an error; the config as YAML copies out to the trainers CLI's loader and
pastes back in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse
from pydantic import Field

from trainers.advantages import ESTIMATORS, AdvantageEstimator, EstimatorParams
from trainers.advantages.base import outcome_result
from trainers.config import PRESETS, RunConfig, load_config, preset_config
from workbench.runs.models import Run
from workbench.runs.web.config_form import schema_fields
from workbench.runs.web.forms import RunForm

from .test_runs_views import form_post

# a run config the trainers stored before the estimators' parameters became a union (every one's, flat)
STORED_FLAT = Path(__file__).parents[2] / "trainers" / "config" / "stored_config_flat_algorithm.json"

URL = reverse("runs:create")


def open_sections(body: str) -> list[str]:
    return re.findall(r'<details class="card config-section" id="section-([\w-]+)" open>', body)


def yaml_out(response) -> str:
    return response.context["form"].config_yaml_out()


def without_run_dir(config: dict) -> dict:
    return {key: value for key, value in config.items() if key not in ("name", "output_dir")}


def test_the_form_leads_with_what_people_change_and_collapses_the_rest(client_for, member):
    response = client_for(member).get(URL + "?preset=gigpo")
    form, body = response.context["form"], response.content.decode()
    lead = [field.name for field in form.lead_fields()]
    assert lead == [
        "name",
        "model.path",
        "training.steps",
        "optimizer.lr",
        "rollout.samples_per_prompt",
        "queue",
        "resources.gpus",
    ]
    sections = {section.name: section for section in form.sections()}
    in_sections = {field.name for section in sections.values() for field in section.fields}
    assert in_sections | set(lead) >= set(form.config_fields)  # every generated field is still there
    assert body.count('<details class="card config-section"') == len(sections) + 1  # + the YAML section
    assert open_sections(body) == []
    assert sections["algorithm"].summary == "estimator=gigpo"
    assert sections["tools"].summary == "tools=frozenlake"
    assert sections["optimizer"].summary == ""  # shown as "defaults"


@pytest.mark.parametrize("preset", sorted(PRESETS.names()))
def test_yaml_copied_out_of_the_form_is_what_the_cli_loads(client_for, member, preset, tmp_path):
    text = yaml_out(client_for(member).get(f"{URL}?preset={preset}"))
    path = tmp_path / "run.yaml"
    path.write_text(text)
    loaded = load_config(path).model_dump(mode="json")
    assert loaded["name"] == preset
    assert without_run_dir(loaded) == without_run_dir(preset_config(preset).model_dump(mode="json"))


def test_pasted_yaml_replaces_the_form_values_and_launches(
    client_for, member, prompts, django_capture_on_commit_callbacks
):
    client = client_for(member)
    config = yaml.safe_load(yaml_out(client.get(URL + "?preset=toolrl")))
    config["training"]["steps"], config["name"] = 7, "from yaml"
    data = {
        **form_post(RunConfig().model_dump(mode="json"), name="typed", dataset_version=prompts.pk),
        "config_yaml": yaml.safe_dump(config),
    }
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(URL, data)
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get()
    assert run.name == "from yaml"
    expected = preset_config("toolrl").model_dump(mode="json")
    expected["training"]["steps"] = 7
    assert without_run_dir(run.config) == without_run_dir(expected)


def test_apply_yaml_fills_the_form_without_launching(client_for, member):
    data = {
        **form_post(RunConfig().model_dump(mode="json")),
        "config_yaml": "training:\n  steps: 9\nalgorithm:\n  estimator: rloo\n",
        "apply_yaml": "1",
    }
    response = client_for(member).post(URL, data)
    form = response.context["form"]
    assert response.status_code == 200 and not Run.objects.exists()
    assert (form["training.steps"].value(), form["algorithm.estimator"].value()) == ("9", "rloo")
    assert form["name"].value() == "r1"  # the YAML named no run: the form keeps its name
    assert yaml.safe_load(form.config_yaml_out())["training"]["steps"] == 9


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("training: [unclosed", "not valid YAML"),
        ("- a list", "must be a mapping"),
        ("trainng:\n  steps: 3\n", "trainng"),
        ("algorithm:\n  eps: 0\n", "algorithm.eps"),
    ],
)
def test_bad_yaml_is_refused_at_its_field_which_opens(client_for, member, text, message):
    data = {**form_post(RunConfig().model_dump(mode="json")), "config_yaml": text}
    response = client_for(member).post(URL, data)
    assert response.status_code == 400 and not Run.objects.exists()
    assert any(message in error for error in response.context["form"].errors["config_yaml"])
    assert open_sections(response.content.decode()) == ["yaml"]


def test_an_error_opens_the_section_that_holds_it(client_for, member):
    config = RunConfig().model_dump(mode="json")
    config["algorithm"]["eps"] = 0.0
    response = client_for(member).post(URL, form_post(config))
    assert response.status_code == 400
    assert open_sections(response.content.decode()) == ["algorithm"]
    assert "eps=0" in {s.name: s for s in response.context["form"].sections()}["algorithm"].summary


def test_an_error_on_a_lead_field_opens_no_section(client_for, member):
    response = client_for(member).post(URL, form_post(RunConfig().model_dump(mode="json"), name=""))
    assert response.status_code == 400 and response.context["form"].errors["name"]
    assert open_sections(response.content.decode()) == []


def test_yaml_copy_keeps_what_was_entered_after_an_error(client_for, member):
    config = RunConfig().model_dump(mode="json")
    config["training"]["steps"], config["algorithm"]["eps"] = 11, 0.0
    form: RunForm = client_for(member).post(URL, form_post(config)).context["form"]
    copied = yaml.safe_load(form.config_yaml_out())
    assert copied["training"]["steps"] == 11 and copied["name"] == "r1"


class FixedParams(EstimatorParams):
    value: float = Field(1.0, description="the advantage of every policy token")


class Fixed(AdvantageEstimator):
    Params = FixedParams

    def __init__(self, value: float = 1.0) -> None:
        self.value = value

    def compute(self, batch):
        return outcome_result(batch.rewards.new_full(batch.rewards.shape, self.value), batch)


def test_the_estimator_choices_and_their_fields_are_the_registered_estimators(monkeypatch):
    monkeypatch.setattr(ESTIMATORS, "_items", dict(ESTIMATORS._items))  # registered for this test only
    ESTIMATORS.register("fixed")(Fixed)
    fields = schema_fields()
    assert [value for value, _ in fields["algorithm.estimator"].choices] == ESTIMATORS.names()
    for _, estimator in ESTIMATORS.items():
        assert {f"algorithm.{name}" for name in estimator.Params.model_fields} <= set(fields)
    assert fields["algorithm.value"].help_text == "fixed: the advantage of every policy token"
    assert fields["algorithm.gamma"].help_text.startswith("ppo, reinforce_pp: ")


def test_switching_the_estimator_in_the_form_stores_its_parameters(
    client_for, member, prompts, django_capture_on_commit_callbacks
):
    data = form_post(RunConfig().model_dump(mode="json"), name="ppo", dataset_version=prompts.pk)
    data["algorithm.estimator"], data["algorithm.gae_lambda"] = "ppo", "0.5"  # grpo's own are still posted
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(member).post(URL, data)
    assert response.status_code == 302, response.context["form"].errors
    assert Run.objects.get().config["algorithm"] == {
        "estimator": "ppo", "gamma": 1.0, "gae_lambda": 0.5, "whiten_advantages": True, "kl_in_reward": 0.0,
    }  # fmt: skip


def test_a_stored_flat_config_fills_the_form_and_launches(
    client_for, member, prompts, django_capture_on_commit_callbacks
):
    stored = json.loads(STORED_FLAT.read_text(encoding="utf-8"))
    form = RunForm(user=member, team=None, config=stored)
    assert (form.initial["algorithm.estimator"], form.initial["algorithm.gigpo_omega"]) == ("ppo", 1.0)
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(member).post(URL, form_post(stored, name="flat", dataset_version=prompts.pk))
    assert response.status_code == 302, response.context["form"].errors
    assert Run.objects.get().config["algorithm"]["gamma"] == 0.99


def test_the_yaml_preview_follows_the_posted_fields(client_for, member, viewer):
    """What htmx posts as a field changes: the preview of those values; an invalid one shows the value of
    the preset the form started from."""
    data = form_post(preset_config("toolrl").model_dump(mode="json"), name="toolrl")
    data["rollout.samples_per_prompt"], data["training.steps"] = 3, "x"
    response = client_for(member).post(reverse("runs:config_yaml") + "?preset=toolrl", data)
    body = response.content.decode()
    assert response.status_code == 200 and body.startswith('<textarea id="config-yaml-out"')
    shown = yaml.safe_load(response.context["form"].config_yaml_out())
    assert (shown["rollout"]["samples_per_prompt"], shown["training"]["steps"]) == (3, 150)
    assert client_for(viewer).post(reverse("runs:config_yaml"), data).status_code == 403
