"""A DeepSpeed run starts one process per rank on its worker: its ranks are bounded by the operator's
maximum (at launch and on the worker), by the cores of the queue's live workers at launch (a CPU run), and
by the training worker's own cores before torchrun starts."""

from __future__ import annotations

import os

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from tests.workbench.support.datasets import prompts_version
from workbench.jobs import services as job_services
from workbench.runs.execution.worker import run_execute
from workbench.runs.models import Run, RunStatus
from workbench.runs.services import run_create


def deepspeed(ranks: int, gpus: int = 0) -> dict:
    return {"training": {"engine": "deepspeed", "deepspeed": {"ranks": ranks}}, "resources": {"gpus": gpus}}


def launch(team, user, config: dict, *, queue: str = "cpu") -> Run:
    rows = prompts_version(team, user)
    return run_create(team=team, user=user, name="ds", config=config, queue=queue, dataset_version=rows)


def refused(team, user, config: dict, *, queue: str = "cpu") -> list[str]:
    with pytest.raises(ValidationError) as caught:
        launch(team, user, config, queue=queue)
    assert not Run.objects.exists()
    return caught.value.message_dict["training.deepspeed.ranks"]


def live_worker(hostname: str, *, cpus: int, queues: tuple[str, ...] = ("cpu",)) -> None:
    job_services.worker_heartbeat_beat(
        hostname=hostname, queues=list(queues), gpus=[], cpus=cpus, pid=1, started_at=timezone.now()
    )


@pytest.fixture
def no_send(monkeypatch) -> list:
    sent: list = []
    monkeypatch.setattr("workbench.runs.tasks.train_run.apply_async", lambda **kw: sent.append(kw))
    return sent


def test_ranks_past_the_operators_maximum_are_refused_on_any_queue(team, member, no_send):
    """The hostile config of the report: 1024 CPU ranks would start 1024 processes on a shared worker."""
    # one pass names every bound it breaks: a live worker's cores too, when one is online
    messages = refused(team, member, deepspeed(1024))
    assert any("WORKBENCH_MAX_RANKS" in message and "8" in message for message in messages), messages


def test_the_operator_sets_the_maximum(team, member, settings, no_send):
    settings.WORKBENCH_MAX_RANKS = 2
    assert "WORKBENCH_MAX_RANKS" in refused(team, member, deepspeed(3))[0]
    assert launch(team, member, deepspeed(2)).status == RunStatus.QUEUED


def test_cpu_ranks_past_every_live_workers_cores_are_refused(team, member, no_send):
    live_worker("small@m1", cpus=4)
    live_worker("big@m2", cpus=64, queues=("rollout",))  # not on the run's queue
    [message] = refused(team, member, deepspeed(6))
    assert "6 ranks" in message and "at most 4 CPU cores" in message
    assert launch(team, member, deepspeed(4)).status == RunStatus.QUEUED


def test_the_form_names_the_bound_on_the_ranks_field(client_for, member):
    page = client_for(member).get(reverse("runs:create")).content.decode()
    assert "WORKBENCH_MAX_RANKS" in page and "CPU cores" in page


def test_the_worker_refuses_more_ranks_than_its_own_cores(team, member, settings):
    """A run launched while no worker was live (or edited since) is checked against the cores of the
    worker that would start its processes, before torchrun starts."""
    settings.WORKBENCH_MAX_RANKS = 1024
    rows = prompts_version(team, member)
    run = run_create(
        team=team, user=member, name="ds", config=deepspeed(1), queue="cpu", dataset_version=rows,
        launch=False,
    )  # fmt: skip
    too_many = len(os.sched_getaffinity(0)) + 1
    config = {**run.config, "training": {**run.config["training"], "steps": 1}}
    config["training"]["deepspeed"] = {**config["training"]["deepspeed"], "ranks": too_many}
    Run.objects.filter(pk=run.pk).update(config=config)
    status = run_execute(run_id=run.pk, worker="w1", train=lambda *a, **k: None)
    run.refresh_from_db()
    assert status == RunStatus.FAILED
    assert "training.deepspeed.ranks" in run.error and f"{too_many} ranks" in run.error
