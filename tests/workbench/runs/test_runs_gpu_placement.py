"""GPU placement without worker processes: the GPUs a worker hands out, claims that never share one (also
at once, from threads on their own connections), release on every way an attempt ends, the training
process's CUDA_VISIBLE_DEVICES, the launch check, and who holds which GPU on the status page."""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from trainers.config import ConfigError, validate_config
from workbench.jobs import services as job_services
from workbench.jobs.gpus import (
    CUDA_ENV,
    GPUS_ENV,
    GpusBusy,
    gpu_list_setting,
    gpus_advertised,
)
from workbench.jobs.models import GpuAssignment
from workbench.runs.execution.lease import LeaseLost
from workbench.runs.execution.recovery import gpus_prune, runs_sweep
from workbench.runs.execution.worker import run_claim, run_execute
from workbench.runs.models import Run, RunStatus
from workbench.runs.services import run_create

from .test_runs_views import form_post


def gpu_run(team, member, gpus: int, name: str = "gpu") -> Run:
    config = validate_config({"resources": {"gpus": gpus}}).model_dump(mode="json")
    return Run.objects.create(team=team, created_by=member, name=name, config=config, queue="gpu")


def held() -> dict[tuple[str, int], int]:
    return dict(((a.host, a.index), a.run_id) for a in GpuAssignment.objects.all())


def recording(seen: dict, fail: bool = False):
    """A trainer stand-in that records what the training process sees, then ends as asked."""

    def train(config, *, sink, should_stop, resume_from=None):
        seen["cuda"] = os.environ.get(CUDA_ENV)
        seen["held"] = held()
        if fail:
            raise RuntimeError("out of memory")

    return train


@pytest.fixture
def gpus_01(monkeypatch):
    monkeypatch.setenv(GPUS_ENV, "0,1")
    monkeypatch.delenv(CUDA_ENV, raising=False)


def test_the_gpu_list_comes_from_the_setting_else_the_inventory(monkeypatch):
    inventory = [
        {"index": 0, "name": "H100", "memory_gb": 80.0},
        {"index": 1, "name": "H100", "memory_gb": 80},
    ]
    assert gpu_list_setting({}) is None
    assert gpu_list_setting({GPUS_ENV: "3, 1,1"}) == [1, 3]
    assert gpu_list_setting({GPUS_ENV: "none"}) == gpu_list_setting({GPUS_ENV: ""}) == []
    with pytest.raises(ValueError, match="GPU indices"):
        gpu_list_setting({GPUS_ENV: "all"})
    assert gpus_advertised(inventory, {}) == inventory
    assert gpus_advertised(inventory, {GPUS_ENV: "all"}) == []  # a malformed list hands out none (logged)
    assert gpus_advertised(inventory, {GPUS_ENV: "1,2"}) == [
        inventory[1],
        {"index": 2, "name": GPUS_ENV, "memory_gb": None},
    ]


def test_resources_validate_against_the_device_and_the_deepspeed_group():
    assert validate_config({}).resources.gpus == 0
    with pytest.raises(ConfigError, match="resources.gpus >= 1"):
        validate_config({"model": {"device": "cuda"}})
    with pytest.raises(ConfigError, match="cuda:0..1"):
        validate_config({"model": {"device": "cuda:2"}, "resources": {"gpus": 2}})
    with pytest.raises(ConfigError, match=r"ranks \(2\) must equal resources.gpus \(4\)"):
        validate_config({"training": {"engine": "deepspeed"}, "resources": {"gpus": 4}})
    config = {"training": {"engine": "deepspeed", "deepspeed": {"ranks": 4}}, "resources": {"gpus": 4}}
    assert validate_config(config).training.deepspeed.ranks == 4


def test_claims_take_free_gpus_and_never_share_one(team, member, gpus_01):
    first, second, third = (gpu_run(team, member, 1, f"r{i}") for i in range(3))
    assert run_claim(run_id=first.pk, worker="a@m1").gpus == [0]
    assert run_claim(run_id=second.pk, worker="a@m1").gpus == [1]
    with pytest.raises(GpusBusy, match="0 of a@m1's are free"):
        run_claim(run_id=third.pk, worker="a@m1")
    third.refresh_from_db()
    assert (third.status, third.attempts, third.gpus) == (RunStatus.QUEUED, 0, [])  # nothing written
    # Another worker on the same machine counts the same GPUs; one on another machine has its own.
    with pytest.raises(GpusBusy):
        run_claim(run_id=third.pk, worker="b@m1")
    assert run_claim(run_id=third.pk, worker="c@m2").gpus == [0]
    assert held() == {("m1", 0): first.pk, ("m1", 1): second.pk, ("m2", 0): third.pk}


def test_a_run_asking_for_more_gpus_than_the_worker_has_is_sent_back(team, member, gpus_01):
    run = gpu_run(team, member, 4)
    with pytest.raises(GpusBusy, match="asks for 4 GPUs; a@m1 has 2"):
        run_claim(run_id=run.pk, worker="a@m1")
    assert not GpuAssignment.objects.exists()


def test_concurrent_claims_get_distinct_gpus(transactional_db, team, member, gpus_01):
    runs = [gpu_run(team, member, 1, f"r{i}") for i in range(4)]
    barrier, outcome = threading.Barrier(len(runs)), {}

    def claim(run: Run) -> None:
        try:
            barrier.wait()
            outcome[run.pk] = run_claim(run_id=run.pk, worker="a@m1").gpus
        except GpusBusy:
            outcome[run.pk] = "busy"
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    taken = [gpus for gpus in outcome.values() if gpus != "busy"]
    assert len(outcome) == 4 and sorted(taken) == [[0], [1]]
    assert sorted(held().values()) == sorted(pk for pk, gpus in outcome.items() if gpus != "busy")
    running = Run.objects.filter(status=RunStatus.RUNNING)
    assert sorted(running.values_list("gpus", flat=True)) == [[0], [1]]


def test_the_attempt_trains_on_its_own_gpus_and_frees_them_when_it_ends(team, member, gpus_01, prompts):
    blocker, run = gpu_run(team, member, 1, "holds 0"), gpu_run(team, member, 1, "trains")
    run_claim(run_id=blocker.pk, worker="a@m1")
    Run.objects.filter(pk=run.pk).update(dataset_version=prompts)
    seen: dict = {}
    assert run_execute(run_id=run.pk, worker="a@m1", train=recording(seen)) == RunStatus.SUCCEEDED
    assert seen == {"cuda": "1", "held": {("m1", 0): blocker.pk, ("m1", 1): run.pk}}
    assert CUDA_ENV not in os.environ  # the worker process's own setting is restored
    run.refresh_from_db()
    assert run.gpus == [1] and f"GPUs [1] ({CUDA_ENV}=1)" in run.log_tail
    assert held() == {("m1", 0): blocker.pk}


def test_a_failed_or_cancelled_attempt_frees_its_gpus(team, member, gpus_01, prompts):
    failing, cancelled = gpu_run(team, member, 2, "fails"), gpu_run(team, member, 2, "cancelled")
    Run.objects.filter(pk__in=[failing.pk, cancelled.pk]).update(dataset_version=prompts)
    seen: dict = {}
    assert run_execute(run_id=failing.pk, worker="a@m1", train=recording(seen, fail=True)) == "failed"
    assert seen["cuda"] == "0,1" and not GpuAssignment.objects.exists()

    def cancel_then_stop(config, *, sink, should_stop, resume_from=None):
        seen["held"] = held()
        Run.objects.filter(pk=cancelled.pk).update(cancel_requested=True)
        assert should_stop()

    status = run_execute(run_id=cancelled.pk, worker="a@m1", train=cancel_then_stop, poll_interval=0)
    assert status == RunStatus.CANCELLED and seen["held"] == {
        ("m1", 0): cancelled.pk,
        ("m1", 1): cancelled.pk,
    }
    assert not GpuAssignment.objects.exists()


def test_a_superseded_attempt_frees_only_its_own_gpus(team, member, gpus_01, prompts):
    run = gpu_run(team, member, 1)
    Run.objects.filter(pk=run.pk).update(dataset_version=prompts)

    def superseded(config, *, sink, should_stop, resume_from=None):
        # Swept and handed on meanwhile: attempt 2 holds the run, and a GPU on another machine.
        Run.objects.filter(pk=run.pk).update(attempts=2)
        GpuAssignment.objects.create(host="m2", index=0, worker="b@m2", run_id=run.pk, attempt=2)
        raise LeaseLost("attempt 1 no longer holds the run")

    assert run_execute(run_id=run.pk, worker="a@m1", train=superseded) is None
    assert held() == {("m2", 0): run.pk}


def test_a_cpu_run_on_a_gpu_worker_sees_no_gpu(run, gpus_01, prompts):
    Run.objects.filter(pk=run.pk).update(dataset_version=prompts)
    seen: dict = {}
    run_execute(run_id=run.pk, worker="a@m1", train=recording(seen))
    assert seen == {"cuda": "", "held": {}}


def test_a_sweep_frees_the_gpus_of_a_dead_workers_run(team, member, gpus_01):
    stranded, finished = gpu_run(team, member, 1, "stranded"), gpu_run(team, member, 1, "finished")
    run_claim(run_id=stranded.pk, worker="a@m1")
    run_claim(run_id=finished.pk, worker="a@m1")
    # A worker killed between recording the end and freeing its GPUs; another one that stopped beating.
    Run.objects.filter(pk=finished.pk).update(status=RunStatus.SUCCEEDED)
    Run.objects.filter(pk=stranded.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    sent: list[int] = []
    runs_sweep(sweeper="s@m9", send=lambda r: sent.append(r.pk))
    assert sent == [stranded.pk] and not GpuAssignment.objects.exists()
    assert gpus_prune() == 0


def live_worker(hostname: str, gpus: int, queues: tuple[str, ...] = ("gpu",)) -> None:
    job_services.worker_heartbeat_beat(
        hostname=hostname,
        queues=list(queues),
        gpus=[{"index": i, "name": "H100", "memory_gb": 80.0} for i in range(gpus)],
        pid=1,
        started_at=timezone.now(),
    )


def test_a_request_no_live_worker_can_meet_is_refused_at_launch(team, member, prompts, monkeypatch):
    live_worker("small@m1", 2)
    live_worker("big@m2", 8, queues=("rollout",))  # not on the run's queue
    calls: list = []
    monkeypatch.setattr("workbench.runs.tasks.train_run.apply_async", lambda **kw: calls.append(kw))
    config = {"resources": {"gpus": 4}}
    with pytest.raises(ValidationError) as refused:
        run_create(team=team, user=member, name="big", config=config, queue="gpu", dataset_version=prompts)
    message = refused.value.message_dict["resources.gpus"][0]
    assert "asks for 4 GPUs" in message and "at most 2" in message
    assert not Run.objects.filter(name="big").exists()
    fits = run_create(
        team=team, user=member, name="fits", config={"resources": {"gpus": 2}}, queue="gpu",
        dataset_version=prompts,
    )  # fmt: skip
    assert fits.status == RunStatus.QUEUED


def test_the_form_shows_the_launch_refusal_on_the_gpus_field(client_for, member, prompts):
    live_worker("small@m1", 1)
    config = validate_config({}).model_dump(mode="json")
    config["resources"]["gpus"] = 3
    data = form_post(config, name="big", queue="gpu", dataset_version=prompts.pk)
    response = client_for(member).post(reverse("runs:create"), data)
    form = response.context["form"]
    assert response.status_code == 400 and "asks for 3 GPUs" in str(form.errors.get("resources.gpus"))


def test_the_status_page_shows_which_run_holds_which_gpu(
    client_for, team, member, other_team, outsider, gpus_01
):
    live_worker("a@m1", 3)
    ours, theirs = gpu_run(team, member, 1, "ours"), gpu_run(other_team, outsider, 1, "theirs")
    run_claim(run_id=ours.pk, worker="a@m1")
    run_claim(run_id=theirs.pk, worker="a@m1")
    body = client_for(member).get("/status/panel/").content.decode()
    row = body[body.index('data-hostname="a@m1"') :]
    row = row[: row.index("</tr>")]
    assert f'class="gpu-holder" data-run="{ours.pk}">run {ours.pk} ours</a>' in row
    assert '<span class="gpu-holder">in use</span>' in row and "theirs" not in row
    assert row.count('<span class="muted">free</span>') == 1
    page = client_for(member).get(ours.get_absolute_url()).content.decode()
    assert '<span class="muted run-gpus">GPU 0</span>' in page and "· 1 GPU" in page


def test_a_run_waiting_for_gpus_or_a_lease_is_retried_without_limit():
    """retry(max_retries=None) means the task's own limit (Celery's default, 3): a 2-GPU run on a loaded
    machine gave up after three looks while a cancelled run was still freeing its GPU."""
    from workbench.runs.tasks import train_run

    assert train_run.max_retries is None
