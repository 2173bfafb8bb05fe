"""Checkpoints in the shared artifact store, in-process: the sink uploads each one before its row records
the store URL, prunes the store as the trainer prunes its directory, keeps the best one current, and the
next attempt on a worker with another (empty) run directory downloads the newest one and resumes from it."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from tests.trainers.storage.s3server import s3_bucket_url, s3_server
from tests.workbench.runs.test_runs_recovery import held
from workbench.runs.execution.artifacts import CheckpointMirror, artifact_store
from workbench.runs.execution.lease import LeaseLost
from workbench.runs.execution.sink import DatabaseSink
from workbench.runs.execution.worker import resume_point, run_dir, run_execute
from workbench.runs.models import Checkpoint, Run, RunStatus


def write_checkpoint(run_dir_: Path, name: str, content: str) -> Path:
    """What the trainer leaves: a directory whose trainer_state.pt is written last."""
    path = run_dir_ / "checkpoints" / name
    (path / "nested").mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_text(f"weights {content}")
    (path / "nested" / "config.json").write_text(content)
    (path / "trainer_state.pt").write_text(f"state {content}")
    return path


def files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def var_dirs(settings, tmp_path):
    """Two workers' own disks: `use("a")` makes this process the worker whose VAR_DIR is a."""

    def use(name: str) -> Path:
        settings.VAR_DIR = tmp_path / name
        return settings.VAR_DIR

    return use


def mirror_sink(run: Run, keep: int = 2, attempt: int | None = None) -> DatabaseSink:
    mirror = CheckpointMirror(run.pk, run_dir(run), store=artifact_store(), keep=keep)
    return DatabaseSink(run.pk, attempt=attempt, checkpoints=mirror)


def test_a_checkpoint_is_uploaded_and_its_row_records_the_store_url(run, var_dirs):
    var_dirs("a")
    path = write_checkpoint(run_dir(run), "step_000002", "2")
    mirror_sink(run).log_checkpoint(2, path)
    store = artifact_store()
    (checkpoint,) = Checkpoint.objects.filter(run=run)
    assert checkpoint.path == str(path)  # what the worker wrote, as every reader of the row knows it
    assert checkpoint.url == store.url_of(f"runs/{run.pk}/checkpoints/step_000002")
    copy = store.get_dir(f"runs/{run.pk}/checkpoints/step_000002", var_dirs("b") / "copy")
    assert files(copy) == files(path)


def test_the_store_keeps_the_newest_checkpoints_and_the_current_best(run, var_dirs):
    var_dirs("a")
    sink, store, prefix = mirror_sink(run, keep=2), artifact_store(), f"runs/{run.pk}/checkpoints"
    for step in (2, 4, 6):
        if step == 4:
            write_checkpoint(run_dir(run), "best", "best at 4")
        sink.log_checkpoint(step, write_checkpoint(run_dir(run), f"step_{step:06d}", str(step)))
    assert store.list_dirs(prefix) == [f"{prefix}/best", f"{prefix}/step_000004", f"{prefix}/step_000006"]
    best = write_checkpoint(run_dir(run), "best", "best at 6, after the last checkpoint")
    sink.close()
    assert files(store.get_dir(f"{prefix}/best", var_dirs("b") / "best")) == files(best)
    assert list(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2, 4, 6]


def test_resume_downloads_the_newest_checkpoint_when_the_worker_that_wrote_it_is_gone(run, var_dirs):
    a = var_dirs("a")
    sink, store = mirror_sink(run, keep=1), artifact_store()
    sink.log_checkpoint(2, write_checkpoint(run_dir(run), "step_000002", "2"))
    own = write_checkpoint(run_dir(run), "step_000004", "4")
    sink.log_checkpoint(4, own)  # the store drops step 2
    assert resume_point(run, store) == (Checkpoint.objects.get(run=run, step=4), own)
    b = var_dirs("b")
    shutil.rmtree(a)  # a's machine is gone
    checkpoint, local = resume_point(run, store)
    assert checkpoint.step == 4 and local == b / "runs" / str(run.pk) / "checkpoints" / "step_000004"
    assert files(local) == {
        "model.safetensors": "weights 4", "nested/config.json": "4", "trainer_state.pt": "state 4"
    }  # fmt: skip
    assert resume_point(run, store) == (checkpoint, local)  # b reads its own copy from now on
    shutil.rmtree(local)
    store.delete(f"runs/{run.pk}/checkpoints/step_000004")
    assert resume_point(run, store) is None  # step 4 is nowhere now, and step 2 was pruned


def test_a_rows_local_path_from_before_the_store_still_resumes(run, tmp_path):
    path = write_checkpoint(tmp_path / "old", "step_000003", "3")
    Checkpoint.objects.create(run=run, step=3, path=str(path))
    assert resume_point(run, artifact_store()) == (Checkpoint.objects.get(run=run), path)


def test_a_store_that_fails_costs_a_checkpoint_only_its_copy_in_the_store(run, var_dirs, monkeypatch):
    """A failed upload is tried again; one that keeps failing leaves the row on the local path, and the
    run goes on (resumable on this worker)."""
    var_dirs("a")
    store = artifact_store()
    mirror = CheckpointMirror(run.pk, run_dir(run), store=store, keep=2)
    sink = DatabaseSink(run.pk, checkpoints=mirror, retry_wait_s=0)
    put_dir, failures = store.put_dir, [OSError("connection reset")]

    def flaky(local, key):
        if failures:
            raise failures.pop()
        return put_dir(local, key)

    monkeypatch.setattr(store, "put_dir", flaky)
    sink.log_checkpoint(2, write_checkpoint(run_dir(run), "step_000002", "2"))
    assert Checkpoint.objects.get(run=run, step=2).url == store.url_of(
        f"runs/{run.pk}/checkpoints/step_000002"
    )
    failures.extend([OSError("store down")] * (sink.retries + 1))
    local = write_checkpoint(run_dir(run), "step_000004", "4")
    sink.log_checkpoint(4, local)
    assert (Checkpoint.objects.get(run=run, step=4).path, Checkpoint.objects.get(run=run, step=4).url) == (
        str(local),
        "",
    )
    assert resume_point(run, store) == (Checkpoint.objects.get(run=run, step=4), local)


def test_a_superseded_attempt_uploads_nothing(run, var_dirs):
    var_dirs("a")
    held(run, stale=False)
    sink = mirror_sink(run, attempt=1)
    Run.objects.filter(pk=run.pk).update(attempts=2)
    with pytest.raises(LeaseLost):
        sink.log_checkpoint(2, write_checkpoint(run_dir(run), "step_000002", "2"))
    assert artifact_store().list_dirs(f"runs/{run.pk}/checkpoints") == []


@pytest.mark.parametrize("store", ["directory", pytest.param("s3", marks=pytest.mark.slow)])  # s3: a server
def test_the_next_attempt_on_another_worker_resumes_from_the_stored_checkpoint(
    run, var_dirs, settings, monkeypatch, store
):
    """Attempt 1 (worker a) checkpoints and dies; attempt 2 runs where VAR_DIR is another, empty disk;
    the store is a shared directory or an S3-compatible server."""
    with contextlib.ExitStack() as stack:
        if store == "s3":
            settings.ARTIFACTS_URL = s3_bucket_url(monkeypatch, stack.enter_context(s3_server()))
        resume_on_another_worker(run, var_dirs)
    assert Checkpoint.objects.get(run=run).url.startswith("s3://" if store == "s3" else "file://")


def resume_on_another_worker(run: Run, var_dirs) -> None:
    seen: dict = {}

    def train(config, *, sink, should_stop, resume_from=None):
        seen.update(resume_from=resume_from, output_dir=config.output_dir)
        if resume_from is None:
            write_checkpoint(Path(config.output_dir), "best", "best")
            sink.log_checkpoint(3, write_checkpoint(Path(config.output_dir), "step_000003", "3"))
            raise SystemExit("the machine died")  # not an Exception: the attempt records nothing
        seen["state"] = files(Path(resume_from))["trainer_state.pt"]
        seen["best"] = files(Path(config.output_dir) / "checkpoints" / "best")["trainer_state.pt"]

    a = var_dirs("a")
    with pytest.raises(SystemExit):
        run_execute(run_id=run.pk, worker="w1", train=train)
    shutil.rmtree(a)  # with its machine
    held(run)  # its lease expired
    b = var_dirs("b")
    assert run_execute(run_id=run.pk, worker="w2", train=train) == RunStatus.SUCCEEDED
    assert seen["output_dir"] == str(b / "runs" / str(run.pk))
    assert seen["resume_from"] == str(b / "runs" / str(run.pk) / "checkpoints" / "step_000003")
    assert (seen["state"], seen["best"]) == ("state 3", "state best")
