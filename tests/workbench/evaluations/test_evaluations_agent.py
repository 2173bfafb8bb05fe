"""Evaluating a checkpoint of an agent run: the run's agent program plays the evaluation's samples, and
the operator's agent bounds hold for the evaluation as for the run."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.workbench.evaluations.conftest import make_run_with_checkpoint
from workbench.evaluations.models import ModelSource
from workbench.evaluations.services import evaluation_config_compose

PROGRAM = "def run(task, client):\n    return None\n"


def agent_checkpoint(team, member, path, agent: dict):
    checkpoint = make_run_with_checkpoint(team, member, path, name="agent-run")
    run = checkpoint.run
    run.config = {**run.config, "rollout": {**run.config["rollout"], "backend": "agent", "agent": agent}}
    run.save()
    return checkpoint


def test_the_runs_agent_program_plays_the_evaluation(team, member, tiny_checkpoint_dir):
    checkpoint = agent_checkpoint(team, member, tiny_checkpoint_dir, {"source": PROGRAM, "wall_s": 30})
    snapshot, _ = evaluation_config_compose(team=team, source=ModelSource.CHECKPOINT, checkpoint=checkpoint)
    assert snapshot["agent"]["source"] == PROGRAM and snapshot["agent"]["wall_s"] == 30
    assert snapshot["tools"] == []


def test_the_operators_agent_bounds_hold_for_an_evaluation(settings, team, member, tiny_checkpoint_dir):
    checkpoint = agent_checkpoint(team, member, tiny_checkpoint_dir, {"source": PROGRAM, "wall_s": 250})
    settings.WORKBENCH_AGENT_MAX_WALL_S = 100  # lowered since the run was launched
    with pytest.raises(ValidationError) as exc:
        evaluation_config_compose(team=team, source=ModelSource.CHECKPOINT, checkpoint=checkpoint)
    assert exc.value.message_dict["agent.wall_s"] == [
        "250 is above the operator's maximum of 100 (WORKBENCH_AGENT_MAX_WALL_S)"
    ]
