"""Fixtures for the evaluations app: a team run with a real checkpoint of the tiny model, prompts to score.

team, other_team, member and outsider come from tests/workbench/conftest.py.
"""

from __future__ import annotations

import pytest

LIMITS = {"max_turns": 1, "max_new_tokens_per_turn": 6}


@pytest.fixture(autouse=True)
def _dirs(settings, tmp_path):
    """Uploaded datasets and the worker's files in a temporary directory; models only under `models`."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.VAR_DIR = tmp_path / "var"
    settings.WORKBENCH_MODEL_ROOTS = [str(tmp_path / "models")]


@pytest.fixture
def prompts(team, member):
    from tests.workbench.support.datasets import prompts_version

    return prompts_version(team, member, n=3)


@pytest.fixture(scope="session")
def tiny_checkpoint_dir(tmp_path_factory):
    """A checkpoint directory as the trainer writes it (save_checkpoint) of a very small tiny model."""
    import torch

    from trainers.models.model_io import load_policy
    from trainers.models.tiny import build_tiny_model
    from trainers.training.checkpoint import save_checkpoint

    torch.set_num_threads(1)
    base = build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "base", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1
    )
    model, tokenizer = load_policy(base)
    return save_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "step_000002", step=2, model=model, tokenizer=tokenizer
    )


def make_run_with_checkpoint(team, user, path, *, name: str = "trained", step: int = 2):
    """A finished run of `team` whose config keeps rollouts short, with a checkpoint row at `path`."""
    from trainers.config import RunConfig
    from workbench.runs.models import Checkpoint, Run

    config = RunConfig(limits=LIMITS).model_dump(mode="json")
    run = Run.objects.create(team=team, created_by=user, name=name, config=config, status="succeeded")
    return Checkpoint.objects.create(run=run, step=step, path=str(path))


@pytest.fixture
def checkpoint(team, member, tiny_checkpoint_dir):
    return make_run_with_checkpoint(team, member, tiny_checkpoint_dir)


@pytest.fixture
def other_checkpoint(other_team, outsider, tiny_checkpoint_dir):
    return make_run_with_checkpoint(other_team, outsider, tiny_checkpoint_dir, name="theirs")
