"""Metric mirrors on a tiny-model run: every step reaches each tracker's own store, a resumed run continues
the same tracker runs, and a blocked or failing tracker neither slows nor fails training."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.trainers.tracking import readers
from trainers.config.schema import RunConfig
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.models.tiny import build_tiny_model
from trainers.tracking.base import Tracker, TrackerRun
from trainers.tracking.ids import read_tracker_runs
from trainers.training.checkpoint import latest_checkpoint
from trainers.training.mirror_sink import MirrorSink, with_mirrors
from trainers.training.run import run_config
from trainers.training.sinks import RunDirSink, read_jsonl

ROOT = Path(__file__).resolve().parents[3]
ALL_FOUR = {
    "tensorboard": {},
    "mlflow": {"experiment": "e"},
    "wandb": {"project": "p"},
    "trackio": {"project": "p"},
}


def _config(tmp_path, steps: int, tracking: dict | None) -> RunConfig:
    model = build_tiny_model(tmp_path / "tiny", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, _ = make_splits(8, 2, seed=1)
    return RunConfig(
        output_dir=str(tmp_path / "run"),
        model={"path": str(model)},
        limits={"max_turns": 1, "max_new_tokens_per_turn": 4, "max_total_new_tokens": 4},
        rollout={"prompts_per_step": 2, "samples_per_prompt": 2},
        reward={"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        training={"steps": steps},
        data={"train_path": str(write_rows(train, tmp_path / "train.jsonl"))},
        tracking=tracking,
    )


def test_a_url_or_key_in_the_run_config_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="tracking.mlflow.tracking_uri"):
        RunConfig(tracking={"mlflow": {"experiment": "e", "tracking_uri": "http://mlflow:5000"}})
    with pytest.raises(ValidationError, match="tracking.wandb.api_key"):
        RunConfig(tracking={"wandb": {"project": "p", "api_key": "secret"}})


def test_a_tensorboard_name_stays_one_directory_under_its_root():
    assert RunConfig(tracking={"tensorboard": "tb"}).tracking.tensorboard.name == "tb"
    assert RunConfig(tracking={"tensorboard": {}}).tracking.tensorboard.name == "tensorboard"
    with pytest.raises(ValidationError, match="tensorboard.name"):
        RunConfig(tracking={"tensorboard": "../elsewhere"})


def test_a_run_without_tracking_imports_no_tracker(tmp_path):
    sink = RunDirSink(tmp_path)
    assert with_mirrors(RunConfig(output_dir=str(tmp_path)), sink, resume=False) is sink
    code = (
        "import sys; from trainers.config.schema import RunConfig;"
        "from trainers.training.sinks import NullSink;"
        "from trainers.training.mirror_sink import with_mirrors;"
        "with_mirrors(RunConfig(), NullSink(), resume=False);"
        "print(sorted({'wandb', 'mlflow', 'trackio', 'tensorboard'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_every_step_reaches_all_four_trackers_and_a_resumed_run_continues_them(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WORKBENCH_TRACKIO_DIR", str(tmp_path / "trackio"))
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run_dir = tmp_path / "run"
    run_config(_config(tmp_path, 2, ALL_FOUR))
    first = read_tracker_runs(run_dir)
    assert set(first) == set(ALL_FOUR)
    run_config(_config(tmp_path, 3, ALL_FOUR), resume_from=latest_checkpoint(run_dir))
    ids = read_tracker_runs(run_dir)
    assert {k: v["id"] for k, v in ids.items()} == {k: v["id"] for k, v in first.items()}

    key = "reward/mean"
    assert [m["step"] for m in read_jsonl(run_dir / "metrics.jsonl") if key in m] == [1, 2, 3]
    assert readers.tensorboard_steps(run_dir / "tensorboard", key) == [1, 2, 3]
    assert readers.mlflow_steps((run_dir / "mlruns").as_uri(), ids["mlflow"]["id"], key) == [1, 2, 3]
    assert readers.wandb_steps(run_dir, ids["wandb"]["id"], key) == [1, 2, 3]
    assert readers.trackio_steps("p", ids["trackio"]["id"], key) == [1, 2, 3]
    failed = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING
        and r.name.startswith(("trainers.tracking", "trainers.training.mirror_sink"))
    ]
    assert failed == []  # no tracker error or drop: the trajectory tables were taken too


class _Blocked(Tracker):
    """Starts, then blocks on its first metrics until released."""

    name = "blocked"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def start(self, run_name, config, resume_id):
        return TrackerRun("blocked-1")

    def log_metrics(self, step, metrics):
        self.entered.set()
        self.release.wait()

    def finish(self):
        pass


class _Raising(Tracker):
    name = "raising"

    def start(self, run_name, config, resume_id):
        return TrackerRun("raising-1")

    def log_metrics(self, step, metrics):
        raise ConnectionError("tracker down")

    def finish(self):
        raise ConnectionError("tracker down")


def test_a_blocked_or_raising_tracker_neither_slows_nor_fails_training(tmp_path):
    config = _config(tmp_path, 4, None)
    blocked, raising = _Blocked(), _Raising()
    sink = MirrorSink(
        RunDirSink(config.output_dir), [blocked, raising], config.output_dir, queue_size=1, close_timeout_s=0
    )
    try:
        result = run_config(config, sink=sink)
        assert result.steps_done == 4 and not result.stopped
        assert blocked.entered.wait(10) and sink.workers[0].thread.is_alive()  # run done, tracker blocked
        assert sink.dropped >= 2  # queue of one behind a blocked tracker
        rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
        assert [r["step"] for r in rows] == [1, 2, 3, 4]
        assert rows[-1]["tracking/dropped"] >= 1  # the run's own metrics report the drops
        sink.workers[1].thread.join(10)
        assert sink.workers[1].errors >= 2 and not sink.workers[1].thread.is_alive()
        assert set(read_tracker_runs(tmp_path / "run")) == {"blocked", "raising"}
    finally:
        blocked.release.set()
