"""Jobs on the rollout workers (remote rollouts, scheduled evaluations) claim no GPU: a run whose
model.device is cuda is refused at launch when they would run on CUDA there, unless the operator declares
GPUs set aside for the rollout workers (WORKBENCH_ROLLOUT_CUDA)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.workbench.support.datasets import prompts_version
from workbench.runs.models import Run
from workbench.runs.services import run_create

CUDA = {"model": {"device": "cuda"}, "resources": {"gpus": 1}}


def create(team, user, config: dict) -> Run:
    rows = prompts_version(team, user)
    return run_create(
        team=team, user=user, name="r", config=config, queue="gpu", launch=False, dataset_version=rows
    )


@pytest.mark.parametrize(
    ("section", "jobs"),
    [
        ({"rollout": {"backend": "remote"}}, "rollout.backend remote"),
        ({"evaluation": {"runner": "jobs"}}, "jobs"),
    ],
)
def test_cuda_for_jobs_on_the_rollout_workers_is_refused(team, member, section, jobs):
    with pytest.raises(ValidationError) as caught:
        create(team, member, {**CUDA, **section})
    [message] = caught.value.message_dict["model.device"]
    assert "WORKBENCH_ROLLOUT_CUDA" in message and "claim no GPU" in message and jobs in message
    assert not Run.objects.exists()


def test_cuda_is_kept_for_training_and_where_the_operator_declares_rollout_gpus(team, member, settings):
    assert create(team, member, CUDA).config["model"]["device"] == "cuda"  # rollouts on the run's own GPU
    settings.WORKBENCH_ROLLOUT_CUDA = True
    assert create(team, member, {**CUDA, "rollout": {"backend": "remote"}}).pk


def test_vllm_remote_rollouts_need_gpus_on_the_rollout_workers(team, member, settings):
    """A vLLM engine takes a GPU whatever model.device says ("auto" here)."""
    remote = {"rollout": {"backend": "remote"}, "generation": {"backend": "vllm"}}
    config = {"model": {"device": "auto"}, **remote}
    with pytest.raises(ValidationError) as caught:
        create(team, member, config)
    assert "WORKBENCH_ROLLOUT_CUDA" in caught.value.message_dict["generation.backend"][0]
    settings.WORKBENCH_ROLLOUT_CUDA = True
    assert create(team, member, config).pk
