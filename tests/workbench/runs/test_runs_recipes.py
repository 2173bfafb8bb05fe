"""The recipes the new-run form starts from: the demo's opens with the team's demo catalog pinned and
launches as it opens (the config of the demo run that learns); without the demo catalog the form says
what to do; every recipe's one-line description is on the page, not only in a tooltip."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from trainers.workbench_api import DEMO_LEARNING_RUN, PRESETS, validate_config
from workbench import demo_catalog
from workbench.runs.models import Run
from workbench.runs.web.recipes import DEMO_RECIPE, DEMO_TITLE, recipe_choices

from .test_runs_views import form_post

DEMO_URL = reverse("runs:create") + f"?preset={DEMO_RECIPE}"


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


def test_the_demo_recipe_comes_first_and_every_preset_follows_with_its_title():
    choices = recipe_choices()
    assert choices[0] == (DEMO_RECIPE, DEMO_TITLE)
    assert choices[1:] == [(name, preset.title) for name, preset in PRESETS.items()]


def test_the_demo_recipe_pins_the_demo_catalog_and_launches_as_it_opens(
    client_for, team, member, django_capture_on_commit_callbacks
):
    demo_catalog.seed_demo_catalog(team=team, user=member)
    pins = demo_catalog.demo_run_pins(team)
    client = client_for(member)
    form = client.get(DEMO_URL).context["form"]
    assert {name: form[name].value() for name in form.PINS} == {
        "dataset_version": pins["dataset_version"].pk,
        "sft_dataset_version": pins["sft_dataset_version"].pk,
        "prompt_version": pins["prompt_version"].pk,
        "reward_version": pins["reward_version"].pk,
        "tool_versions": [version.pk for version in pins["tool_versions"]],
        "agent_version": None,  # the demo runs' rollouts are built in
    }
    config = validate_config(DEMO_LEARNING_RUN).model_dump(mode="json")
    pinned = {name: form[name].value() for name in form.PINS if form[name].value() is not None}
    posted = form_post(config, name="demo", **pinned)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(DEMO_URL, posted)
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get(name="demo")
    assert (run.dataset_version, run.sft_dataset_version) == (
        pins["dataset_version"],
        pins["sft_dataset_version"],
    )
    assert (run.config["sft"], run.config["model"]) == (config["sft"], config["model"])


def test_without_the_demo_catalog_the_demo_recipe_says_what_is_missing(client_for, team, member):
    response = client_for(member).get(DEMO_URL)
    assert response.status_code == 200
    form = response.context["form"]
    assert all(not form[name].value() for name in form.PINS)
    note = response.context["recipe_note"]
    assert demo_catalog.DATASET_NAME in note and "seed_demo" in note
    assert escape(note) in response.content.decode()


@pytest.mark.parametrize("page", ["runs:create", "home"])
def test_every_recipe_shows_its_description_as_text(client_for, team, member, page):
    html = client_for(member).get(reverse(page)).content.decode()
    for name, title in recipe_choices():
        assert f'{name}</a> <span class="muted">{escape(title)}</span>' in html
