"""Operator bounds on run configs: sandbox limits, network, model and data paths are refused past the
operator's settings when a run is created (on the form's fields too) and again on the worker before it
trains; defaulted limits are clamped, paths resolved; the trainers CLI stays unbounded."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.workbench.support.datasets import prompts_version
from trainers.config import RunConfig, load_config
from workbench.datasets.models import Dataset, DatasetVersion
from workbench.runs.config.bounds import run_config_bound
from workbench.runs.execution.worker import execution_config, run_execute
from workbench.runs.models import Run, RunStatus
from workbench.runs.services import run_create

from .test_runs_views import form_post


@pytest.fixture
def roots(settings, tmp_path):
    """A model root and a data root of the operator's, and a place outside both."""
    for name in ("models", "data", "outside", "media"):
        (tmp_path / name).mkdir()
    settings.WORKBENCH_MODEL_ROOTS = [str(tmp_path / "models")]
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path / "data")]
    settings.MEDIA_ROOT = tmp_path / "media"
    return tmp_path


def python_tool(**config) -> dict:
    return {"tools": [{"name": "python", "config": config}]}


def create(team, user, config: dict) -> Run:
    rows = prompts_version(team, user)  # what every run trains on
    return run_create(
        team=team, user=user, name="r", config=config, queue="cpu", launch=False, dataset_version=rows
    )


def refusal(team, user, config: dict) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        create(team, user, config)
    assert not Run.objects.exists()
    return caught.value.message_dict


@pytest.mark.parametrize(
    ("limit", "value", "setting"),
    [
        ("memory_mb", 100_000, "WORKBENCH_SANDBOX_MAX_MEMORY_MB"),
        ("wall_s", 86_400, "WORKBENCH_SANDBOX_MAX_WALL_S"),
        ("cpu_s", 86_400, "WORKBENCH_SANDBOX_MAX_CPU_S"),
        ("scratch_mb", 50_000, "WORKBENCH_SANDBOX_MAX_SCRATCH_MB"),
    ],
)
def test_sandbox_limits_past_the_maximum_are_refused_naming_the_bound(team, member, limit, value, setting):
    errors = refusal(team, member, python_tool(limits={limit: value}))
    assert list(errors) == [f"tools.0.config.limits.{limit}"]
    assert setting in errors[f"tools.0.config.limits.{limit}"][0]


def test_a_limit_given_as_text_is_compared_as_the_sandbox_reads_it(team, member):
    errors = refusal(team, member, python_tool(limits={"memory_mb": "100000"}))
    assert "WORKBENCH_SANDBOX_MAX_MEMORY_MB" in errors["tools.0.config.limits.memory_mb"][0]


def test_limits_within_the_maxima_are_kept(team, member, settings):
    settings.WORKBENCH_SANDBOX_MAX_MEMORY_MB = 2048
    run = create(team, member, python_tool(limits={"memory_mb": 2048, "wall_s": 30}))
    assert run.config["tools"][0]["config"]["limits"] == {"memory_mb": 2048, "wall_s": 30}


def test_network_only_where_the_operator_allows_it(team, member, settings):
    errors = refusal(team, member, python_tool(limits={"network": True}))
    assert "WORKBENCH_SANDBOX_ALLOW_NETWORK" in errors["tools.0.config.limits.network"][0]
    settings.WORKBENCH_SANDBOX_ALLOW_NETWORK = True
    assert create(team, member, python_tool(limits={"network": True})).pk


def test_an_oversized_sandbox_pool_is_refused(team, member):
    errors = refusal(team, member, python_tool(pool_size=500))
    assert "WORKBENCH_SANDBOX_MAX_POOL_SIZE" in errors["tools.0.config.pool_size"][0]


def test_preload_is_the_operators_not_a_run_configs(team, member, settings):
    """The sandbox's parent imports preloaded modules before the call's namespaces and privilege drop."""
    errors = refusal(team, member, python_tool(limits={"preload": ["ctypes"]}))
    assert list(errors) == ["tools.0.config.limits.preload"]
    assert "WORKBENCH_SANDBOX_PRELOAD" in errors["tools.0.config.limits.preload"][0]
    settings.WORKBENCH_SANDBOX_PRELOAD = ["numpy"]
    assert "tools.0.config.limits.preload" in refusal(team, member, python_tool(limits={"preload": ["os"]}))
    assert create(team, member, python_tool(limits={"preload": ["numpy"]})).pk


def calculator(**config) -> dict:
    return {"tools": [{"name": "calculator", "config": config}]}


@pytest.mark.parametrize(
    ("key", "value", "setting"),
    [
        ("max_bits", 10**9, "WORKBENCH_CALCULATOR_MAX_BITS"),
        ("max_depth", 10**6, "WORKBENCH_CALCULATOR_MAX_DEPTH"),
    ],
)
def test_calculator_bounds_past_the_maximum_are_refused(team, member, key, value, setting):
    """max_bits sizes the big integers a call may build (3**20000000 was seconds of work), max_depth its
    recursion: a run config may not lift either past the operator's maximum."""
    errors = refusal(team, member, calculator(**{key: value}))
    assert list(errors) == [f"tools.0.config.{key}"] and setting in errors[f"tools.0.config.{key}"][0]
    assert "tools.0.config.max_bits" in refusal(team, member, calculator(max_bits="lots"))


def test_calculator_defaults_above_the_maximum_are_lowered_to_it(team, member, settings):
    settings.WORKBENCH_CALCULATOR_MAX_BITS = 1024  # below the calculator's default of 4096
    run = create(team, member, calculator(max_depth=32))
    assert run_config_bound(run.config, team_id=team.pk)["tools"][0]["config"] == {
        "max_bits": 1024,
        "max_depth": 32,
    }


def test_model_and_tokenizer_only_from_the_model_roots(team, member, roots):
    errors = refusal(team, member, {"model": {"path": "/etc", "tokenizer_path": str(roots / "outside")}})
    assert set(errors) == {"model.path", "model.tokenizer_path"}
    assert (
        "WORKBENCH_MODEL_ROOTS" in errors["model.path"][0]
        and str(roots / "models") in errors["model.path"][0]
    )
    (roots / "models" / "qwen").mkdir()
    run = create(team, member, {"model": {"path": str(roots / "models" / "qwen")}})
    assert run.config["model"]["path"] == str(roots / "models" / "qwen")
    assert create(team, member, {"model": {"path": "tiny"}}).pk  # the bundled model


@pytest.mark.parametrize("escape", ["dotdot", "symlink", "relative"])
def test_paths_are_resolved_before_the_check(team, member, roots, escape):
    (roots / "outside" / "secret").mkdir()
    if escape == "symlink":
        (roots / "models" / "link").symlink_to(roots / "outside" / "secret")
        path = str(roots / "models" / "link")
    else:
        path = {"dotdot": str(roots / "models" / ".." / "outside" / "secret"), "relative": "models/x"}[escape]
    assert "model.path" in refusal(team, member, {"model": {"path": path}})


@pytest.mark.parametrize("where", ["sft.data_path", "data.train_path", "tools.0.config.corpus_path"])
def test_data_files_only_from_the_data_roots(team, member, roots, where):
    outside, inside = roots / "outside" / "rows.jsonl", roots / "data" / "rows.jsonl"
    section, key = where.split(".")[0], where.split(".")[-1]

    def config(path) -> dict:
        if section == "tools":
            return {"tools": [{"name": "search", "config": {"corpus_path": str(path)}}]}
        return {section: {key: str(path)}}

    errors = refusal(team, member, config(outside))
    assert list(errors) == [where] and "WORKBENCH_DATA_ROOTS" in errors[where][0]
    assert create(team, member, config(inside)).pk


def test_media_files_count_only_as_the_teams_own_datasets(team, other_team, member, roots):
    name = "datasets/2026/12/rows.jsonl"
    (roots / "media" / "datasets" / "2026" / "12").mkdir(parents=True)
    (roots / "media" / name).write_text("{}\n")
    theirs = Dataset.objects.create(team=other_team, name="theirs")
    DatasetVersion.objects.create(
        item=theirs, number=1, file=name, source_name="rows.jsonl", file_format="jsonl", file_size=3
    )
    config = {"sft": {"data_path": str(roots / "media" / name)}}
    assert "sft.data_path" in refusal(team, member, config)
    ours = Dataset.objects.create(team=team, name="ours")
    DatasetVersion.objects.create(
        item=ours, number=1, file=name, source_name="rows.jsonl", file_format="jsonl", file_size=3
    )
    assert create(team, member, config).pk


def test_the_form_refuses_with_the_bound_on_the_field_and_shows_the_bounds(client_for, member):
    client = client_for(member)
    assert "memory_mb ≤ 4096" in client.get(reverse("runs:create")).content.decode()
    config = {**RunConfig().model_dump(mode="json"), **python_tool(limits={"memory_mb": 100_000})}
    response = client.post(reverse("runs:create"), form_post(config))
    assert response.status_code == 400
    [message] = response.context["form"].errors["tools"]
    assert "tools.0.config.limits.memory_mb" in message and "WORKBENCH_SANDBOX_MAX_MEMORY_MB" in message
    assert not Run.objects.exists()


def test_the_worker_checks_a_config_edited_since_launch(team, member):
    run = create(team, member, python_tool())
    Run.objects.filter(pk=run.pk).update(config={**run.config, **python_tool(limits={"network": True})})
    trained = []
    status = run_execute(run_id=run.pk, worker="w1", train=lambda *a, **k: trained.append(a))
    run.refresh_from_db()
    assert (status, trained) == (RunStatus.FAILED, [])
    assert "WORKBENCH_SANDBOX_ALLOW_NETWORK" in run.error and "tools.0.config.limits.network" in run.error


def test_the_worker_clamps_defaulted_limits_and_trains_on_resolved_paths(team, member, roots, settings):
    settings.VAR_DIR = roots
    (roots / "models" / "real").mkdir()
    (roots / "models" / "alias").symlink_to(roots / "models" / "real")
    run = create(team, member, {"model": {"path": str(roots / "models" / "alias")}, **python_tool()})
    settings.WORKBENCH_SANDBOX_MAX_MEMORY_MB = 512  # below the sandbox's default of 1024 MB
    config = execution_config(run)
    assert config.model.path == str(roots / "models" / "real")
    assert config.tools[0].config["limits"] == {"memory_mb": 512}


def test_the_operators_cli_loader_is_not_bounded(tmp_path):
    config = {
        "model": {"path": "/srv/models/big"},
        **python_tool(limits={"memory_mb": 100_000, "network": True}),
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    assert load_config(path).tools[0].config["limits"]["network"] is True
