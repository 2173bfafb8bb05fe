"""Run services: config validated by key path, immutable snapshot, launch on commit, cancel, edit."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from tests.workbench.support.datasets import prompts_version
from workbench.runs.models import RunStatus
from workbench.runs.services import run_cancel, run_clone_initial, run_create, run_update


def create(team, user, config=None, **kwargs):
    kwargs.setdefault("queue", "cpu")
    writer = team.memberships.filter(user=user, role__in=("member", "admin")).exists()
    if "dataset_version" not in kwargs and writer:
        kwargs["dataset_version"] = prompts_version(team, user)  # the rows every run trains on
    return run_create(team=team, user=user, name="r1", config=config or {}, **kwargs)


def test_bad_value_is_reported_on_its_key(team, member):
    with pytest.raises(ValidationError) as err:
        create(team, member, {"rollout": {"samples_per_prompt": 0}})
    assert "rollout.samples_per_prompt" in err.value.message_dict


def test_unknown_key_is_reported(team, member):
    with pytest.raises(ValidationError) as err:
        create(team, member, {"optimizer": {"learning_rate": 1e-3}})
    assert "optimizer.learning_rate" in err.value.message_dict


def test_unknown_queue_is_refused(team, member):
    with pytest.raises(ValidationError) as err:
        create(team, member, queue="nowhere")
    assert "queue" in err.value.message_dict


def test_viewer_cannot_launch(team, viewer):
    with pytest.raises(PermissionDenied):
        create(team, viewer)


def test_snapshot_is_normalised_and_launch_waits_for_commit(team, member, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = create(team, member, {"rollout": {"samples_per_prompt": 4}}, tags=["demo", " demo "])
    assert run.config["rollout"]["samples_per_prompt"] == 4
    assert run.config["optimizer"]["lr"] == 1e-6  # defaults are frozen into the snapshot
    assert (run.status, len(callbacks), len(run.celery_task_id)) == (RunStatus.QUEUED, 1, 32)
    assert list(run.tags.values_list("name", flat=True)) == ["demo"]


def test_cancel_of_a_queued_run_is_immediate(run, member):
    run = run_cancel(run=run, user=member)
    assert (run.status, run.cancel_requested) == (RunStatus.CANCELLED, True)


def test_cancel_of_a_running_run_asks_the_worker(run, member):
    run.status = RunStatus.RUNNING
    run.save()
    run = run_cancel(run=run, user=member)
    assert (run.status, run.cancel_requested) == (RunStatus.RUNNING, True)


def test_update_changes_metadata_not_config(run, member):
    before = dict(run.config)
    run = run_update(run=run, user=member, name="renamed", notes="n", tags=["base"], is_baseline=True)
    run.refresh_from_db()
    assert (run.name, run.is_baseline, run.config) == ("renamed", True, before)


def test_clone_starts_from_the_snapshot(run):
    initial = run_clone_initial(run=run)
    assert (initial["name"], initial["config"]) == ("demo (copy)", run.config)


def test_demo_runs_are_launched_once(team, member, django_capture_on_commit_callbacks):
    from django.core.management import call_command

    from workbench.demo_catalog import seed_demo_catalog
    from workbench.runs.management.commands.seed_demo_runs import COLLAPSE, LEARNING

    seed_demo_catalog(team=team, user=member)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("seed_demo_runs", team=team.name, username=member.username)
        call_command("seed_demo_runs", team=team.name, username=member.username)
    assert len(callbacks) == 2
    assert sorted(team.runs.values_list("name", flat=True)) == sorted([LEARNING, COLLAPSE])
    for run in team.runs.all():  # both finish by themselves: a bounded number of steps
        assert run.dataset_version is not None and run.sft_dataset_version is not None
        assert run.tool_versions.count() == 1 and run.config["training"]["steps"] <= 50


@pytest.fixture
def reward_version(team, member):
    from workbench.rewards.services import reward_definition_create

    components = [{"name": "correctness", "weight": 1.0}, {"name": "format", "weight": 0.2}]
    return reward_definition_create(team=team, user=member, name="corr+fmt", components=components)


@pytest.fixture
def prompt_version(team, member):
    from workbench.prompts.services import prompt_template_create

    return prompt_template_create(team=team, user=member, name="qwen", family="qwen_tool", source="")


def test_pinned_versions_define_their_config_sections(team, member, reward_version, prompt_version):
    run = create(team, member, reward_version=reward_version, prompt_version=prompt_version, launch=False)
    assert [c["name"] for c in run.config["reward"]["components"]] == ["correctness", "format"]
    assert run.config["template"]["name"] == "qwen_tool"
    assert (run.reward_version, run.prompt_version) == (reward_version, prompt_version)


def test_another_teams_pin_is_refused(other_team, outsider, member, team, reward_version):
    with pytest.raises(ValidationError):
        create(other_team, outsider, reward_version=reward_version, launch=False)
