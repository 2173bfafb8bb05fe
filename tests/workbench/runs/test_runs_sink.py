"""DatabaseSink: buffers, flushes by size or time, and orders checkpoints after the data they cover."""

from __future__ import annotations

from pathlib import Path

from workbench.runs.execution.sink import DatabaseSink
from workbench.runs.models import MetricPoint, TrajectoryRecord


class FakeClock:
    """A settable monotonic clock, so time-based flushing is tested without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_points_wait_until_the_size_threshold(run):
    sink = DatabaseSink(run.id, flush_points=4, flush_seconds=60, clock=FakeClock())
    sink.log_metrics(0, {"a": 1.0, "b": 2.0})
    assert MetricPoint.objects.count() == 0
    sink.log_metrics(1, {"a": 1.5, "b": 2.5})
    assert MetricPoint.objects.count() == 4


def test_time_threshold_flushes(run):
    clock = FakeClock()
    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=2.0, clock=clock)
    sink.log_metrics(0, {"a": 1.0})
    clock.now = 2.5
    sink.log_metrics(1, {"a": 2.0})
    assert MetricPoint.objects.count() == 2


def test_checkpoint_stores_buffered_data_first(run, make_trajectory):
    sink = DatabaseSink(
        run.id, flush_points=1000, flush_trajectories=1000, flush_seconds=60, clock=FakeClock()
    )
    sink.log_metrics(7, {"reward/mean": 0.25})
    sink.log_trajectories(7, [make_trajectory("g0", 0)])
    sink.log_checkpoint(7, Path("/tmp/ckpt-7"))
    run.refresh_from_db()
    stored = (MetricPoint.objects.count(), TrajectoryRecord.objects.count(), run.last_checkpoint_step)
    assert stored == (1, 1, 7)


def test_eval_results_are_namespaced(run):
    sink = DatabaseSink(run.id, clock=FakeClock())
    sink.log_eval(10, {"accuracy": 0.5, "eval/pass@4": 0.75})
    sink.close()
    assert sorted(MetricPoint.objects.values_list("key", flat=True)) == ["eval/accuracy", "eval/pass@4"]


def test_alerts_are_stored(run):
    sink = DatabaseSink(run.id, clock=FakeClock())
    sink.log_alerts([{"step": 3, "rule": "entropy_drop", "evidence": {"drop": 0.6}}])
    assert list(run.alerts.values_list("rule", flat=True)) == ["entropy_drop"]


def test_a_dropped_connection_is_retried_without_duplicates(transactional_db, run):
    """The database kills the sink's connection mid-run; the batch is sent again on a new one."""
    import psycopg
    from django.db import connection

    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=60, retry_wait_s=0, clock=FakeClock())
    sink.log_metrics(0, {"a": 1.0, "b": 2.0})
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    sink.flush()
    assert sorted(MetricPoint.objects.filter(run=run).values_list("key", "value")) == [("a", 1.0), ("b", 2.0)]
