"""The worker side of a run, driven by a scripted trainer that uses the sink and should_stop like the loop."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from trainers.training.loop import TrainResult
from workbench.runs.execution.worker import RunBusy, run_execute
from workbench.runs.models import MetricPoint, Run, RunStatus, TrajectoryRecord
from workbench.runs.telemetry.ingest import checkpoint_record


def scripted(
    steps: int = 3, fail_at: int | None = None, cancel_at: int | None = None, seen: dict | None = None
):
    """A trainer stand-in: logs a metric per step, checkpoints at the end, honours should_stop."""

    def train(config, *, sink, should_stop, resume_from=None):
        if seen is not None:
            seen.update(resume_from=resume_from, output_dir=config.output_dir)
        for step in range(steps):
            if step == cancel_at:
                Run.objects.filter(output_dir_run(config)).update(cancel_requested=True)
            if should_stop():
                return
            logging.getLogger("trainers.loop").info("step %s", step)
            if step == fail_at:
                raise ValueError("boom")
            sink.log_metrics(step, {"reward/mean": step / 10})
        sink.log_checkpoint(steps - 1, Path(config.output_dir) / "ckpt")

    return train


def output_dir_run(config):
    from django.db.models import Q

    return Q(pk=int(Path(config.output_dir).name))


def test_successful_run_stores_metrics_and_checkpoint(run):
    assert run_execute(run_id=run.pk, worker="w1", train=scripted()) == RunStatus.SUCCEEDED
    run.refresh_from_db()
    assert (run.status, run.attempts, run.last_checkpoint_step, run.worker) == ("succeeded", 1, 2, "w1")
    assert MetricPoint.objects.filter(run=run).count() == 3


def test_failure_keeps_error_log_tail_and_recorded_points(run):
    assert run_execute(run_id=run.pk, worker="w1", train=scripted(fail_at=2)) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.error == "ValueError: boom"
    assert "step 1" in run.log_tail and "Traceback" in run.log_tail
    assert MetricPoint.objects.filter(run=run).count() == 2


def test_cancel_mid_run_stops_and_keeps_points(run):
    train = scripted(steps=10, cancel_at=2)
    assert run_execute(run_id=run.pk, worker="w1", train=train, poll_interval=0) == RunStatus.CANCELLED
    assert MetricPoint.objects.filter(run=run).count() == 2


def test_finished_run_is_not_run_again(run):
    run.status = RunStatus.SUCCEEDED
    run.save()
    assert run_execute(run_id=run.pk, worker="w1", train=scripted()) is None


def test_redelivery_resumes_from_the_last_checkpoint(run, tmp_path):
    run.status, run.attempts = RunStatus.RUNNING, 1
    run.save()
    (tmp_path / "step_5").mkdir()
    checkpoint_record(run_id=run.pk, step=5, path=str(tmp_path / "step_5"))
    seen: dict = {}
    run_execute(run_id=run.pk, worker="w2", train=scripted(seen=seen))
    run.refresh_from_db()
    assert (seen["resume_from"], run.attempts) == (str(tmp_path / "step_5"), 2)


def test_a_second_delivery_waits_while_the_holder_is_alive(run):
    run.status, run.heartbeat_at, run.worker = RunStatus.RUNNING, timezone.now(), "w1"
    run.save()
    with pytest.raises(RunBusy):
        run_execute(run_id=run.pk, worker="w2", train=scripted())


def test_a_stale_holder_is_taken_over(run):
    run.status, run.worker, run.attempts = RunStatus.RUNNING, "w1", 1
    run.heartbeat_at = timezone.now() - timedelta(seconds=settings.RUNS_LEASE_S + 1)
    run.save()
    assert run_execute(run_id=run.pk, worker="w2", train=scripted()) == RunStatus.SUCCEEDED


def test_a_loop_stopped_by_an_echo_trap_alert_ends_cancelled_with_the_reason(run):
    def train(config, *, sink, should_stop, resume_from=None):
        sink.log_metrics(1, {"reward/mean": 0.5})
        return TrainResult(steps_done=1, stopped=True)

    assert run_execute(run_id=run.pk, worker="w1", train=train) == RunStatus.CANCELLED
    run.refresh_from_db()
    assert "echo-trap" in run.error


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sft_then_rl_trains_in_the_worker_path(team, member, tmp_path, settings):
    """The real trainers path a worker takes: SFT warm start from expert conversations, then RL."""
    import random

    import torch

    from trainers.demo.arithmetic import make_problem, write_rows
    from trainers.demo.experts import make_experts, write_experts
    from trainers.workbench_api import run_config
    from workbench.runs.services import run_create

    torch.set_num_threads(1)
    settings.VAR_DIR = tmp_path
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path)]  # the operator's data root holds the files below
    problems = [make_problem(random.Random(0), i) for i in range(8)]
    config = {
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "limits": {"max_new_tokens_per_turn": 12, "max_turns": 2},
        "training": {"steps": 1},
        "sft": {
            "data_path": str(write_experts(make_experts(problems), tmp_path / "experts.jsonl")),
            "batch_size": 4,
        },
        "data": {"train_path": str(write_rows(problems, tmp_path / "train.jsonl"))},
    }
    run = run_create(team=team, user=member, name="sft", config=config, queue="cpu", launch=False)
    assert run_execute(run_id=run.pk, worker="w1", train=run_config) == RunStatus.SUCCEEDED
    assert list(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True)) == [1]
    assert "sft" in run.config and (tmp_path / "runs" / str(run.pk) / "checkpoints").exists()
    # each sampled token's entropy reaches the database with the trajectory, for the inspector's shading
    stored = [record.data["turns"] for record in TrajectoryRecord.objects.filter(run=run)]
    sampled = [turn for turns in stored for turn in turns if turn["role"] == "assistant"]
    assert sampled and all(len(turn["entropies"]) == len(turn["token_ids"]) for turn in sampled)
