"""A dead worker machine must not strand its run. Real Celery workers, each in its own process group, train
the tiny model with checkpoints; the whole group is SIGKILLed (no shutdown handler runs, nothing is given
back to the broker) and a new worker starts: its sweep requeues the run once the lease expired, and the run
resumes from its last checkpoint, not from step 0, and finishes; on Redis (whose 6-hour visibility timeout
would otherwise hold the message) and on kombu's filesystem broker (which had already handed the message
out for good). Also: two sweepers at once requeue each stranded run exactly once, and the status page
lists stranded and recovered runs of the user's teams only."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from kombu import Connection, Exchange, Queue

from tests.support.polling import wait_for
from tests.workbench.support.worker import WorkerProcess
from trainers.demo.arithmetic import make_problem, write_rows
from workbench.celery_app import app as celery_app
from workbench.runs.execution.recovery import TRAIN_TASK, runs_sweep
from workbench.runs.models import Checkpoint, MetricPoint, RecoveryOutcome, Run, RunRecovery, RunStatus
from workbench.runs.services import run_create

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

SHORT_LEASE = {"RUNS_LEASE_S": "6", "RUNS_SWEEP_INTERVAL_S": "1"}
STEPS = 6
UNTOUCHED = -12345.0  # written over the stored steps a resumed run must not compute again


def run_now(pk: int) -> Run:
    return Run.objects.get(pk=pk)


@pytest.fixture
def train_file(tmp_path, settings):
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path)]  # the operator's data root (the workers get it too)
    rng = random.Random(0)
    return write_rows([make_problem(rng, i) for i in range(16)], tmp_path / "train.jsonl")


def stranded_run(team, member, train_file, queue: str) -> Run:
    """The bundled tiny model, 2 prompts x 2 samples of one short turn, a checkpoint every 2 steps."""
    config = {
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "limits": {"max_new_tokens_per_turn": 8, "max_turns": 1},
        "training": {"steps": STEPS},
        "checkpoint": {"every_steps": 2},
        "data": {"train_path": str(train_file)},
    }
    run = run_create(team=team, user=member, name="machine dies", config=config, queue="cpu", launch=False)
    Run.objects.filter(pk=run.pk).update(queue=queue)  # only this test's workers consume it
    return run_now(run.pk)


def lease_env(worker_env: dict, tmp_path, *, redis: bool) -> dict:
    env = {**worker_env, **SHORT_LEASE, "WORKBENCH_VAR_DIR": str(tmp_path / "var")}
    env["WORKBENCH_DATA_ROOTS"] = str(tmp_path)
    if not redis:  # no REDIS_URL: kombu's filesystem transport under WORKBENCH_VAR_DIR/broker
        env = {k: v for k, v in env.items() if k not in {"REDIS_URL", "REDIS_KEY_PREFIX"}}
    return env


def filesystem_broker(var_dir) -> Connection:
    """A connection to the filesystem broker the workers of `lease_env(redis=False)` use."""
    broker = var_dir / "broker"
    for sub in ("queue", "processed", "control"):
        (broker / sub).mkdir(parents=True, exist_ok=True)
    folders = {"data_folder_in": "queue", "data_folder_out": "queue", "processed_folder": "processed",
               "control_folder": "control"}  # fmt: skip
    options = {key: str(broker / sub) for key, sub in folders.items()}
    return Connection("filesystem://localhost//", transport_options={**options, "store_processed": False})


def kill_mid_run_and_resume(env: dict, tmp_path, run: Run, send: Callable[[], None]) -> None:
    first = WorkerProcess(env=env, log_dir=tmp_path, queues=run.queue)
    first.start()
    first.wait_online()
    send()
    wait_for(lambda: (run_now(run.pk).last_checkpoint_step or 0) >= 2, 180, "a checkpoint", first)
    first.kill()  # SIGKILL to the worker's whole process group: the machine is gone
    assert run_now(run.pk).status == RunStatus.RUNNING, "the run finished before the worker was killed"
    checkpoint = Checkpoint.objects.filter(run=run).order_by("-step").first().step
    MetricPoint.objects.filter(run=run, step__lte=checkpoint).update(value=UNTOUCHED)
    second = WorkerProcess(env=env, log_dir=tmp_path, queues=run.queue)
    second.start()
    try:
        second.wait_online()
        wait_for(lambda: run_now(run.pk).is_finished, 180, "the stranded run to finish", second)
    finally:
        second.stop()
    assert_resumed(run_now(run.pk), checkpoint, second.hostname)


def assert_resumed(run: Run, checkpoint: int, worker: str) -> None:
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert (run.attempts, run.worker) == (2, worker)
    recovery = RunRecovery.objects.get(run=run)
    assert (recovery.outcome, recovery.attempt, recovery.checkpoint_step) == (
        RecoveryOutcome.REQUEUED, 1, checkpoint
    )  # fmt: skip
    assert (recovery.resumed_by, recovery.resumed_from_step) == (worker, checkpoint)
    rewards = dict(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", "value"))
    assert sorted(rewards) == list(range(1, STEPS + 1))
    # Steps up to the checkpoint were not trained again; every later step was.
    assert [step for step, value in rewards.items() if value == UNTOUCHED] == list(range(1, checkpoint + 1))


@pytest.mark.slow
def test_a_run_stranded_by_a_dead_worker_resumes_on_redis(
    transactional_db, worker_env, tmp_path, team, member, train_file
):
    run = stranded_run(team, member, train_file, queue=f"dies-{uuid.uuid4().hex[:6]}")
    env = lease_env(worker_env, tmp_path, redis=True)  # the default 6-hour visibility timeout
    send = lambda: celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue)  # noqa: E731
    kill_mid_run_and_resume(env, tmp_path, run, send)


@pytest.mark.slow
def test_a_run_stranded_by_a_dead_worker_resumes_on_the_filesystem_broker(
    transactional_db, worker_env, tmp_path, team, member, train_file
):
    run = stranded_run(team, member, train_file, queue=f"dies-{uuid.uuid4().hex[:6]}")
    env = lease_env(worker_env, tmp_path, redis=False)

    def send() -> None:
        with filesystem_broker(tmp_path / "var") as broker:
            celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue, connection=broker)

    kill_mid_run_and_resume(env, tmp_path, run, send)


@contextmanager
def redis_queue(name: str) -> Iterator[Callable[[], int]]:
    """The queue declared and bound as a worker consuming it would; yields how many messages wait in it."""
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        Queue(name, Exchange(name), routing_key=name).bind(channel).declare()
        try:
            yield lambda: channel.client.llen(name)  # the client adds the session's key prefix
        finally:
            channel.client.delete(name)


def test_two_sweepers_at_once_requeue_each_stranded_run_exactly_once(transactional_db, team):
    queue = f"swept-{uuid.uuid4().hex[:6]}"
    an_hour_ago = timezone.now() - timedelta(hours=1)
    runs = Run.objects.bulk_create(
        Run(team=team, name=f"stranded {i}", config={}, queue=queue, status=RunStatus.RUNNING,
            worker="dead@host", attempts=1, heartbeat_at=an_hour_ago)
        for i in range(12)
    )  # fmt: skip
    start = threading.Barrier(2)

    def sweep(name: str) -> None:
        start.wait()
        try:
            runs_sweep(sweeper=name)
        finally:
            connection.close()  # this thread's own connection

    sweepers = [threading.Thread(target=sweep, args=(f"sweeper-{i}@test",)) for i in range(2)]
    with redis_queue(queue) as waiting:
        for thread in sweepers:
            thread.start()
        for thread in sweepers:
            thread.join(timeout=60)
        for run in runs:
            assert RunRecovery.objects.filter(run=run).count() == 1
            assert run_now(run.pk).status == RunStatus.QUEUED
        assert waiting() == len(runs)


def test_the_status_page_lists_stranded_and_recovered_runs_of_the_users_teams(
    db, team, other_team, member, client_for
):
    an_hour_ago = timezone.now() - timedelta(hours=1)

    def make(owner, name: str, **fields) -> Run:
        return Run.objects.create(team=owner, name=name, config={}, **fields)

    stranded = make(team, "stranded", status=RunStatus.RUNNING, worker="dead@a", attempts=1,
                    heartbeat_at=an_hour_ago, last_checkpoint_step=4)  # fmt: skip
    live = make(team, "live", status=RunStatus.RUNNING, worker="w@a", attempts=1, heartbeat_at=timezone.now())
    recovered = make(team, "recovered", status=RunStatus.RUNNING, worker="w@b", attempts=2)
    RunRecovery.objects.create(run=recovered, attempt=1, worker="dead@a", heartbeat_at=an_hour_ago,
                               detected_by="w@b", outcome=RecoveryOutcome.REQUEUED, resumed_at=timezone.now(),
                               resumed_by="w@b", resumed_from_step=4)  # fmt: skip
    theirs = make(other_team, "theirs", status=RunStatus.RUNNING, attempts=1, heartbeat_at=an_hour_ago)
    RunRecovery.objects.create(run=theirs, attempt=1, detected_by="x", outcome=RecoveryOutcome.GAVE_UP)

    body = client_for(member).get("/status/panel/").content.decode()

    assert f'<tr class="stranded" data-run="{stranded.pk}">' in body
    assert f'data-run="{live.pk}"' not in body
    assert f'<tr class="recovery" data-run="{recovered.pk}" data-outcome="requeued">' in body
    assert "on w@b</span> from checkpoint step 4" in body
    assert f'data-run="{theirs.pk}"' not in body and "theirs" not in body
