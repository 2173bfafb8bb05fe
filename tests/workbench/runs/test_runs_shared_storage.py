"""A run resumes on a worker that shares nothing with the dead one but the artifact store: real Celery
worker processes (Redis, PostgreSQL) training the tiny model, each with its own run directory
(WORKBENCH_VAR_DIR); the first is SIGKILLed after a checkpoint and its disk removed, the second
downloads the checkpoint and finishes."""

from __future__ import annotations

import shutil
import uuid

import pytest

from tests.support.polling import wait_for
from tests.workbench.runs import test_runs_worker as crash
from tests.workbench.support.worker import WorkerProcess
from trainers.workbench_api import ArtifactStore
from workbench.runs.models import Run, RunRecovery, RunStatus
from workbench.runs.services import run_create
from workbench.runs.tasks import train_run

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(420)]


def test_a_killed_run_resumes_from_the_stored_checkpoint_on_a_worker_with_another_disk(
    transactional_db, worker_env, tmp_path, team, member, prompts
):
    queue = f"store-{uuid.uuid4().hex[:6]}"  # only this test's workers consume it
    store_url = str(tmp_path / "artifacts")
    env = {
        **worker_env,
        "CELERY_VISIBILITY_TIMEOUT": "8",
        "RUNS_LEASE_S": "6",
        "WORKBENCH_ARTIFACTS_URL": store_url,
    }
    run = run_create(
        team=team,
        user=member,
        name="moved",
        config=crash.tiny_config(6),
        queue="cpu",
        launch=False,
        dataset_version=prompts,
    )
    Run.objects.filter(pk=run.pk).update(queue=queue)  # where a sweep requeues it: not the session worker's
    first = WorkerProcess(
        env={**env, "WORKBENCH_VAR_DIR": str(tmp_path / "a")}, log_dir=tmp_path, queues=queue
    )
    first.start()
    first.wait_online()
    train_run.apply_async(args=[run.pk], queue=queue)
    wait_for(lambda: (crash.run_now(run.pk).last_checkpoint_step or 0) >= 2, 240, "a checkpoint", first)
    first.kill()
    shutil.rmtree(tmp_path / "a")  # its disk went with it
    second_dir = tmp_path / "b"
    second = WorkerProcess(env={**env, "WORKBENCH_VAR_DIR": str(second_dir)}, log_dir=tmp_path, queues=queue)
    second.start()
    try:
        second.wait_online()
        wait_for(lambda: crash.run_now(run.pk).is_finished, 300, "the resumed run to finish", second)
    finally:
        second.stop()
    run = crash.run_now(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert run.attempts == 2 and run.worker == second.hostname
    (resumed,) = set(RunRecovery.objects.filter(run=run).values_list("resumed_from_step", flat=True))
    assert resumed in set(run.checkpoints.values_list("step", flat=True)) and resumed > 0
    assert f"resuming from step {resumed}" in run.log_tail
    assert crash.reward_steps(run) == [1, 2, 3, 4, 5, 6]  # no step lost, none twice
    downloaded = second_dir / "runs" / str(run.pk) / "checkpoints"
    assert (downloaded / f"step_{6:06d}" / "trainer_state.pt").exists()
    store = ArtifactStore.from_url(store_url)
    last = run.checkpoints.get(step=6)
    assert last.path == str(downloaded / "step_000006")
    assert last.url == store.url_of(f"runs/{run.pk}/checkpoints/step_000006")
    assert store.exists(f"runs/{run.pk}/checkpoints/step_000006")
