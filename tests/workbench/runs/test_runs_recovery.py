"""Stranded runs in-process: the sweep hands on only runs whose lease expired, gives up after the last
allowed attempt, and a worker whose attempt was superseded stops writing (heartbeat and sink fenced)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from workbench.runs.execution.lease import LeaseKeeper, LeaseLost
from workbench.runs.execution.recovery import runs_sweep
from workbench.runs.execution.sink import DatabaseSink
from workbench.runs.execution.worker import run_claim, run_execute
from workbench.runs.models import Checkpoint, MetricPoint, RecoveryOutcome, Run, RunRecovery, RunStatus
from workbench.runs.telemetry.ingest import checkpoint_record


def held(run: Run, *, worker: str = "w1", attempts: int = 1, stale: bool = True, **fields) -> Run:
    """Put the run in the hands of `worker`'s attempt, with a lease that expired (stale) or is live."""
    age = settings.RUNS_LEASE_S + 5 if stale else 0
    fields.update(status=RunStatus.RUNNING, worker=worker, attempts=attempts)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=age), **fields)
    return Run.objects.get(pk=run.pk)


def another(run: Run, name: str) -> Run:
    return Run.objects.create(team=run.team, created_by=run.created_by, name=name, config=run.config)


def test_a_sweep_hands_on_only_runs_whose_lease_expired(run):
    stranded = held(run, last_step=7, last_checkpoint_step=6)
    live = held(another(run, "live"), stale=False)
    queued = another(run, "queued")
    finished = held(another(run, "done"))
    Run.objects.filter(pk=finished.pk).update(status=RunStatus.SUCCEEDED)
    sent: list[int] = []

    recoveries = runs_sweep(sweeper="sweeper@a", send=lambda r: sent.append(r.pk))

    assert sent == [stranded.pk]
    assert Run.objects.get(pk=stranded.pk).status == RunStatus.QUEUED
    assert [Run.objects.get(pk=r.pk).status for r in (live, queued, finished)] == [
        RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.SUCCEEDED
    ]  # fmt: skip
    (recovery,) = recoveries
    assert (recovery.run_id, recovery.attempt, recovery.worker, recovery.outcome) == (
        stranded.pk, 1, "w1", RecoveryOutcome.REQUEUED
    )  # fmt: skip
    assert (recovery.last_step, recovery.checkpoint_step, recovery.detected_by) == (7, 6, "sweeper@a")
    assert runs_sweep(sweeper="sweeper@b", send=lambda r: sent.append(r.pk)) == []
    assert sent == [stranded.pk]


def test_a_run_stranded_on_its_last_attempt_fails_with_a_clear_error(run):
    held(run, attempts=settings.RUNS_MAX_ATTEMPTS)
    sent: list[int] = []
    (recovery,) = runs_sweep(sweeper="s", send=lambda r: sent.append(r.pk))
    run.refresh_from_db()
    assert sent == [] and recovery.outcome == RecoveryOutcome.GAVE_UP
    assert run.status == RunStatus.FAILED and run.finished_at is not None
    assert f"Gave up after {settings.RUNS_MAX_ATTEMPTS} attempts" in run.error and "w1" in run.error


def test_a_send_that_fails_leaves_the_run_to_the_next_sweep(run):
    held(run)

    def broker_down(_run):
        raise ConnectionError("broker unreachable")

    with pytest.raises(ConnectionError):
        runs_sweep(sweeper="s", send=broker_down)
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert not RunRecovery.objects.exists()
    sent: list[int] = []
    assert len(runs_sweep(sweeper="s", send=lambda r: sent.append(r.pk))) == 1
    assert sent == [run.pk]


def scripted_from(seen: dict):
    def train(config, *, sink, should_stop, resume_from=None):
        seen["resume_from"] = resume_from
        sink.log_metrics(9, {"reward/mean": 0.9})

    return train


def test_the_next_attempt_resumes_from_the_checkpoint_and_is_recorded(run, tmp_path):
    held(run)
    (tmp_path / "step_6").mkdir()
    checkpoint_record(run_id=run.pk, step=6, path=str(tmp_path / "step_6"))
    runs_sweep(sweeper="s", send=lambda r: None)
    seen: dict = {}
    assert run_execute(run_id=run.pk, worker="w2", train=scripted_from(seen)) == RunStatus.SUCCEEDED
    recovery = RunRecovery.objects.get(run=run)
    assert seen["resume_from"] == str(tmp_path / "step_6")
    assert (recovery.resumed_by, recovery.resumed_from_step) == ("w2", 6)
    assert Run.objects.get(pk=run.pk).attempts == 2


def test_a_delivery_takes_over_an_expired_lease_until_the_last_attempt(run):
    held(run, attempts=1)
    claimed = run_claim(run_id=run.pk, worker="w2")
    assert (claimed.attempts, claimed.worker) == (2, "w2")
    assert RunRecovery.objects.get(run=run).outcome == RecoveryOutcome.TAKEN_OVER
    held(run, worker="w2", attempts=settings.RUNS_MAX_ATTEMPTS)
    assert run_claim(run_id=run.pk, worker="w3") is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_a_worker_whose_attempt_was_superseded_stops_writing(run):
    """Its worker was away past the lease (a paused VM, a partition); the run went on elsewhere."""

    def train(config, *, sink, should_stop, resume_from=None):
        sink.log_metrics(1, {"reward/mean": 0.1})
        sink.flush()
        held(Run.objects.get(pk=run.pk), worker="w1")  # its lease expires while it is away
        runs_sweep(sweeper="s", send=lambda r: None)
        run_claim(run_id=run.pk, worker="w2")
        sink.log_metrics(2, {"reward/mean": 0.2})
        sink.flush()
        raise AssertionError("the stale worker went on writing")

    assert run_execute(run_id=run.pk, worker="w1", train=train) is None
    run.refresh_from_db()
    assert (run.status, run.worker, run.attempts, run.error) == (RunStatus.RUNNING, "w2", 2, "")
    assert list(MetricPoint.objects.filter(run=run).values_list("step", flat=True)) == [1]


def test_the_sink_refuses_writes_once_the_attempt_is_superseded(run, tmp_path):
    held(run, stale=False)
    sink = DatabaseSink(run.pk, attempt=1)
    sink.log_checkpoint(2, tmp_path / "step_2")
    Run.objects.filter(pk=run.pk).update(attempts=2)
    with pytest.raises(LeaseLost):
        sink.log_checkpoint(4, tmp_path / "step_4")
    assert list(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2]


def test_the_lease_keeper_renews_its_own_lease_and_notices_a_lost_one(run):
    held(run)
    keeper = LeaseKeeper(run.pk, attempt=1)
    keeper.beat()
    run.refresh_from_db()
    assert not keeper.lost.is_set()
    assert (timezone.now() - run.heartbeat_at).total_seconds() < settings.RUNS_LEASE_S
    should_stop = keeper.guard(lambda: False)
    assert should_stop() is False
    Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)  # swept: handed on
    keeper.beat()
    assert keeper.lost.is_set()
    with pytest.raises(LeaseLost):
        should_stop()
