"""What the worker needs is checked when a run is created: the RL rows, and the SFT conversations of a
config with an sft section, each pinned as the right kind of dataset; the refusal names the pin."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.workbench.support.datasets import conversations_version, prompts_version
from trainers.config import RunConfig
from workbench.runs.models import Run
from workbench.runs.services import run_clone_initial, run_create

from .test_runs_views import form_post


def create(team, user, config: dict, **pins) -> Run:
    return run_create(team=team, user=user, name="r", config=config, queue="cpu", launch=False, **pins)


def refusal(team, user, config: dict, **pins) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as err:
        create(team, user, config, **pins)
    return err.value.message_dict


def test_a_run_without_rows_to_train_on_is_refused_at_the_dataset_pin(team, member):
    assert refusal(team, member, {}) == {
        "dataset_version": ["Pin a dataset of prompts: RL trains on its rows."]
    }


def test_an_sft_section_without_conversations_is_refused_at_the_sft_pin(team, member):
    errors = refusal(team, member, {"sft": {}}, dataset_version=prompts_version(team, member))
    assert (
        list(errors) == ["sft_dataset_version"]
        and "pin a conversations dataset" in errors["sft_dataset_version"][0]
    )


def test_each_pin_takes_its_own_kind_of_dataset(team, member):
    prompts, experts = prompts_version(team, member), conversations_version(team, member)
    errors = refusal(team, member, {"sft": {}}, dataset_version=experts, sft_dataset_version=prompts)
    assert "experts v1 holds conversations" in errors["dataset_version"][0]
    assert "prompts v1 holds prompts" in errors["sft_dataset_version"][0]


def test_sft_data_without_an_sft_section_is_refused(team, member):
    prompts, experts = prompts_version(team, member), conversations_version(team, member)
    errors = refusal(team, member, {}, dataset_version=prompts, sft_dataset_version=experts)
    assert list(errors) == ["sft_dataset_version"] and "no sft section" in errors["sft_dataset_version"][0]


def test_sft_data_is_pinned_like_the_rl_dataset(team, member):
    prompts, experts = prompts_version(team, member), conversations_version(team, member)
    run = create(team, member, {"sft": {"epochs": 2}}, dataset_version=prompts, sft_dataset_version=experts)
    run.refresh_from_db()
    assert (run.dataset_version, run.sft_dataset_version) == (prompts, experts)
    assert run.config["sft"]["data_path"] is None and run.config["sft"]["epochs"] == 2  # the worker writes it
    assert run_clone_initial(run=run)["sft_dataset_version"] == experts.pk


def test_the_form_shows_the_refusal_on_the_pin_field(client_for, team, member):
    config = RunConfig(sft={}).model_dump(mode="json")
    data = form_post(config, dataset_version=prompts_version(team, member).pk)
    response = client_for(member).post(reverse("runs:create"), data)
    assert response.status_code == 400 and not Run.objects.exists()
    assert response.context["form"].errors["sft_dataset_version"] == [
        "The sft section trains on expert conversations: pin a conversations dataset."
    ]


def test_the_pin_fields_offer_only_their_kind(client_for, team, member):
    prompts, experts = prompts_version(team, member), conversations_version(team, member)
    form = client_for(member).get(reverse("runs:create")).context["form"]
    assert list(form.fields["dataset_version"].queryset) == [prompts]
    assert list(form.fields["sft_dataset_version"].queryset) == [experts]
