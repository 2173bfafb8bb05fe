"""The CLI demos' progress: a bar per phase (SFT steps, RL steps, evaluation) with its latest numbers,
drawn only on a terminal (or when asked), every phase recorded either way; the libraries' own bars and
DeepSpeed's accelerator warning silenced."""

from __future__ import annotations

import io
import math
import os

import pytest

from trainers.cli import main
from trainers.demo.progress import Progress
from trainers.demo.recipe import DemoSettings, run_demo

TINY = {  # the calculator demo in seconds: a one-layer model, a few steps of each phase
    "n_train": 40, "n_eval": 4, "n_val": 4, "num_layers": 1, "sft_tool_steps": 3, "sft_steps": 2,
    "rl_steps": 2, "prompts_per_step": 2, "samples_per_prompt": 2, "eval_every": 0, "threads": 1,
}  # fmt: skip


@pytest.fixture
def libraries_restored():
    """The CLI quiets transformers, huggingface_hub and DeepSpeed for its process; tests share theirs."""
    from huggingface_hub.utils import enable_progress_bars
    from transformers.utils import logging as transformers_logging

    accelerator = os.environ.get("DS_ACCELERATOR")
    yield
    transformers_logging.enable_progress_bar()
    enable_progress_bars()
    if accelerator is None:
        os.environ.pop("DS_ACCELERATOR", None)
    else:
        os.environ["DS_ACCELERATOR"] = accelerator


def test_a_bar_shows_the_phase_its_steps_and_its_latest_numbers():
    stream = io.StringIO()
    progress = Progress(enabled=True, stream=stream)
    with progress.phase("SFT", 3) as phase:
        for loss in (2.0, 1.5, 1.25):
            phase.advance(loss=loss)
    last = stream.getvalue().split("\r")[-1]
    assert last.startswith("SFT: 100%") and "3/3" in last and "loss=1.25" in last
    assert [(p.name, p.total, p.done, p.latest) for p in progress.phases] == [("SFT", 3, 3, {"loss": 1.25})]


def test_no_bar_is_drawn_where_stderr_is_not_a_terminal():
    stream = io.StringIO()  # not a TTY, as in tests, CI logs and pipes
    progress = Progress(stream=stream)
    with progress.phase("RL", 2) as phase:
        phase.advance(reward=0.5)
    assert not progress.enabled and stream.getvalue() == ""
    assert progress.phases[0].done == 1 and progress.phases[0].latest == {"reward": 0.5}


def test_every_phase_of_a_demo_run_reports_its_progress(tmp_path):
    progress = Progress(stream=io.StringIO())
    run_demo(DemoSettings(**TINY), tmp_path, progress)
    phases = {p.name: p for p in progress.phases}
    assert list(phases) == ["SFT", "evaluation after SFT", "RL", "evaluation after RL"]
    for phase in phases.values():
        assert phase.done == phase.total > 0, phase
    assert phases["SFT"].total == TINY["sft_tool_steps"] + TINY["sft_steps"]
    assert phases["RL"].total == TINY["rl_steps"]
    assert math.isfinite(phases["SFT"].latest["loss"]) and 0 <= phases["RL"].latest["reward"] <= 1
    for name in ("evaluation after SFT", "evaluation after RL"):
        assert set(phases[name].latest) == {"greedy_accuracy", "sampled_accuracy"}
    assert progress.stream.getvalue() == ""


def test_the_cli_demo_writes_its_table_and_nothing_of_the_libraries(tmp_path, capsys, libraries_restored):
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in TINY.items()]
    assert main(["demo", *flags, "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("metric") and "greedy accuracy" in out
    assert "Writing model shards" not in out + err and "Setting accelerator to CPU" not in out + err
    assert err == ""  # stderr is no terminal here: no bars of ours either
