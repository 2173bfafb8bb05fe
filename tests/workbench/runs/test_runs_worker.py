"""Runs on real Celery worker processes (Redis, PostgreSQL) with the trainers loop on the tiny model:
launch to success, cancel within seconds, and a SIGKILLed worker whose run resumes on another worker
from its last checkpoint with no gap and no duplicate step."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.polling import wait_for
from tests.workbench.support.worker import WorkerProcess
from workbench.runs.models import MetricPoint, Run, RunStatus
from workbench.runs.services import run_cancel, run_create
from workbench.runs.tasks import train_run

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(420)]


def tiny_config(steps: int) -> dict:
    """The bundled tiny model, 2 prompts x 2 samples, short turns: a few seconds per step on a CPU; the
    rows come from the pinned `prompts` dataset, which the worker exports from the database."""
    return {
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "limits": {"max_new_tokens_per_turn": 12, "max_turns": 2},
        "training": {"steps": steps},
        "checkpoint": {"every_steps": 2},
    }


def run_now(pk: int) -> Run:
    return Run.objects.get(pk=pk)


def reward_steps(run: Run) -> list[int]:
    return sorted(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True))


def test_launched_run_trains_on_the_worker(transactional_db, celery_worker, team, member, prompts):
    run = run_create(
        team=team, user=member, name="tiny", config=tiny_config(3), queue="cpu", dataset_version=prompts
    )
    done = wait_for(lambda: run_now(run.pk).is_finished, 300, "the run to finish", celery_worker)
    run = run_now(run.pk)
    assert done and run.status == RunStatus.SUCCEEDED, run.log_tail
    assert reward_steps(run) == [1, 2, 3]
    assert run.trajectories.count() == 3 * 4
    assert run.last_checkpoint_step == 3


def test_cancel_stops_the_worker_within_seconds(transactional_db, celery_worker, team, member, prompts):
    run = run_create(
        team=team, user=member, name="long", config=tiny_config(500), queue="cpu", dataset_version=prompts
    )
    wait_for(lambda: (run_now(run.pk).last_step or 0) >= 1, 240, "a first step", celery_worker)
    run_cancel(run=run_now(run.pk), user=member)
    started = time.monotonic()
    wait_for(lambda: run_now(run.pk).is_finished, 60, "the cancelled run to stop", celery_worker)
    run = run_now(run.pk)
    assert run.status == RunStatus.CANCELLED
    assert time.monotonic() - started < 30  # one step at most, on a loaded 2-core machine
    assert reward_steps(run)  # what was recorded is kept


def test_sigkilled_worker_run_resumes_elsewhere(
    transactional_db, worker_env, tmp_path, team, member, prompts
):
    queue = f"kill-{uuid.uuid4().hex[:6]}"  # only this test's workers consume it
    env = {**worker_env, "CELERY_VISIBILITY_TIMEOUT": "8", "RUNS_LEASE_S": "6"}
    run = run_create(
        team=team,
        user=member,
        name="killed",
        config=tiny_config(6),
        queue="cpu",
        launch=False,
        dataset_version=prompts,
    )
    Run.objects.filter(pk=run.pk).update(queue=queue)  # where a sweep requeues it: not the session worker's
    first = WorkerProcess(env=env, log_dir=tmp_path, queues=queue)
    first.start()
    first.wait_online()
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: (run_now(run.pk).last_checkpoint_step or 0) >= 2, 240, "a checkpoint", first)
    first.kill()
    second = WorkerProcess(env=env, log_dir=tmp_path, queues=queue)
    second.start()
    try:
        second.wait_online()
        wait_for(lambda: run_now(run.pk).is_finished, 300, "the resumed run to finish", second)
    finally:
        second.stop()
    run = run_now(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert run.attempts == 2 and run.worker == second.hostname
    assert reward_steps(run) == [1, 2, 3, 4, 5, 6]
