"""A run whose rollouts run on the rollout queue: real Celery worker processes (Redis, PostgreSQL), two
on the rollout queue and one training worker, one torch thread each. The run trains on the trajectories
the in-process rollout of the same config and seed samples; a rollout worker SIGKILLed mid-job has its
job sent to the other worker, and every group of every step is stored exactly once."""

from __future__ import annotations

import random
import re
import uuid

import pytest

from tests.support.polling import wait_for
from tests.workbench.support.worker import WorkerProcess
from trainers.demo.arithmetic import make_problem, write_rows
from trainers.training.sinks import read_jsonl
from trainers.workbench_api import run_config, validate_config
from workbench.celery_app import app as celery_app
from workbench.runs.execution.recovery import TRAIN_TASK
from workbench.runs.models import MetricPoint, Run, RunStatus, TrajectoryRecord
from workbench.runs.services import run_create

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(420)]

PROMPTS, SAMPLES, STEPS = 4, 2, 2


@pytest.fixture
def train_file(tmp_path, settings):
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path)]
    rng = random.Random(0)
    return write_rows([make_problem(rng, i) for i in range(16)], tmp_path / "train.jsonl")


def remote_config(train_file, **rollout) -> dict:
    """The bundled tiny model at its smallest, multi-turn calculator rollouts, a job per rollout worker."""
    return {
        "model": {"tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1}},
        "tools": [{"name": "calculator"}],
        "limits": {"max_new_tokens_per_turn": 8, "max_turns": 2, "max_total_new_tokens": 16},
        "rollout": {
            "prompts_per_step": PROMPTS,
            "samples_per_prompt": SAMPLES,
            "backend": "remote",
            "job_timeout_s": 120,
            **rollout,
        },
        "optimizer": {"lr": 1e-2},
        "training": {"steps": STEPS},
        "checkpoint": {"every_steps": 10},
        "data": {"train_path": str(train_file)},
    }


def shared_env(worker_env: dict, tmp_path) -> dict:
    """Every worker sees the same run directories and artifact store (weights), as on a shared volume, and
    the jobs go to a rollout queue of the test's own: a rollout worker of another test session on the same
    Redis would otherwise take some (and answer them, as it reads the same shared weights)."""
    shared = {
        "WORKBENCH_VAR_DIR": tmp_path / "var",
        "WORKBENCH_ARTIFACTS_URL": tmp_path / "artifacts",
        "WORKBENCH_DATA_ROOTS": tmp_path,
        "WORKBENCH_ROLLOUT_QUEUE": f"rollout-{uuid.uuid4().hex[:6]}",
    }
    return {**worker_env, **{k: str(v) for k, v in shared.items()}, "WORKER_HEARTBEAT_TTL": "8"}


def start(env: dict, tmp_path, queues: str) -> WorkerProcess:
    worker = WorkerProcess(env=env, log_dir=tmp_path, queues=queues)
    worker.start()
    return worker


def launch(team, member, config: dict) -> Run:
    run = run_create(team=team, user=member, name="rollout workers", config=config, queue="cpu", launch=False)
    queue = f"train-{uuid.uuid4().hex[:6]}"  # only this test's training worker takes it
    Run.objects.filter(pk=run.pk).update(queue=queue)
    return Run.objects.get(pk=run.pk)


def in_process_trajectories(config: dict, tmp_path) -> list[dict]:
    """The same config trained in this process with in-process rollouts, as `python -m trainers` does."""
    local = {**config, "rollout": {**config["rollout"], "backend": "local"}, "name": "rollout workers",
             "output_dir": str(tmp_path / "in_process")}  # fmt: skip
    run_config(validate_config(local))
    return read_jsonl(tmp_path / "in_process" / "trajectories.jsonl")


def assert_same_as_in_process(run: Run, expected: list[dict]) -> None:
    """Every group of every step once, with the in-process run's token ids; log-probs to a relative 1e-5
    (a batch of another size may round a CPU matmul's last bits differently)."""
    stored = {(r.step, r.key): r.data for r in TrajectoryRecord.objects.filter(run=run)}
    assert len(stored) == TrajectoryRecord.objects.filter(run=run).count() == STEPS * PROMPTS * SAMPLES
    assert sorted(stored) == sorted((t["step"], t["uid"]) for t in expected)
    for want in expected:
        got = stored[(want["step"], want["uid"])]
        assert [t["token_ids"] for t in got["turns"]] == [t["token_ids"] for t in want["turns"]]
        for a, b in zip(got["turns"], want["turns"], strict=True):
            if b["logprobs"] is not None:
                assert a["logprobs"] == pytest.approx(b["logprobs"], rel=1e-5, abs=1e-6)


def metric(run: Run, key: str) -> list[float]:
    return list(MetricPoint.objects.filter(run=run, key=key).order_by("step").values_list("value", flat=True))


def test_a_run_on_two_rollout_workers_trains_on_the_in_process_trajectories(
    transactional_db, worker_env, tmp_path, team, member, train_file
):
    config = remote_config(train_file)
    run = launch(team, member, config)
    env = shared_env(worker_env, tmp_path)
    workers = [
        start(env, tmp_path, env["WORKBENCH_ROLLOUT_QUEUE"]),
        start(env, tmp_path, env["WORKBENCH_ROLLOUT_QUEUE"]),
        start(env, tmp_path, run.queue),
    ]
    try:
        for worker in workers:
            worker.wait_online()
        celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue)
        wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 300, "the run to finish", *workers)
    finally:
        for worker in workers:
            worker.stop()
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert_same_as_in_process(run, in_process_trajectories(config, tmp_path))
    assert metric(run, "rollout/chunks") == [2.0] * STEPS
    assert metric(run, "rollout/weight_version") == [1.0, 2.0]  # a new version after the first update
    assert max(metric(run, "rollout/workers")) == 2.0
    assert metric(run, "rollout/resent") == [0.0] * STEPS
    assert not (tmp_path / "artifacts" / "runs" / str(run.pk) / "rollout").exists()  # dropped at the end


def test_a_rollout_worker_killed_mid_job_loses_no_trajectory_and_counts_none_twice(
    transactional_db, worker_env, tmp_path, team, member, train_file
):
    config = remote_config(train_file, prompts_per_job=1)  # small jobs: each worker gets one at once
    run = launch(team, member, config)
    env = shared_env(worker_env, tmp_path)
    doomed, survivor = (
        start(env, tmp_path, env["WORKBENCH_ROLLOUT_QUEUE"]),
        start(env, tmp_path, env["WORKBENCH_ROLLOUT_QUEUE"]),
    )
    trainer = start(env, tmp_path, run.queue)
    workers = [doomed, survivor, trainer]
    try:
        for worker in workers:
            worker.wait_online()
        celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue)
        # its first job: the worker is importing torch and loading the policy, nowhere near done
        took = lambda: re.search(r"rollout_chunk\[[^\]]+\] received", doomed.log_tail(100_000))  # noqa: E731
        wait_for(took, 120, "a job on the doomed worker", *workers)
        doomed.kill()  # SIGKILL to its process group: nothing is acknowledged or given back
        wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 300, "the run to finish", *workers)
    finally:
        for worker in workers:
            worker.stop()
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert metric(run, "rollout/resent")[0] >= 1.0  # the killed worker's job, sent to the survivor
    assert metric(run, "rollout/workers")[1] == 1.0
    assert_same_as_in_process(run, in_process_trajectories(config, tmp_path))


def test_one_step_stale_rollouts_run_on_the_rollout_workers_during_the_update(
    transactional_db, worker_env, tmp_path, team, member, train_file
):
    config = remote_config(train_file, max_staleness=1)
    run = launch(team, member, config)
    env = shared_env(worker_env, tmp_path)
    workers = [start(env, tmp_path, env["WORKBENCH_ROLLOUT_QUEUE"]), start(env, tmp_path, run.queue)]
    try:
        for worker in workers:
            worker.wait_online()
        celery_app.send_task(TRAIN_TASK, args=[run.pk], queue=run.queue)
        wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 300, "the run to finish", *workers)
    finally:
        for worker in workers:
            worker.stop()
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    # step 2's rollout was sent, from the prefetch thread, before step 1's update
    assert metric(run, "rollout/staleness") == [0.0, 1.0]
    assert metric(run, "rollout/weight_version") == [1.0, 1.0]
    assert TrajectoryRecord.objects.filter(run=run).count() == STEPS * PROMPTS * SAMPLES
