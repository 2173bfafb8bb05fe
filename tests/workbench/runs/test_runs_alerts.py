"""Echo-trap detection over stored series: a collapsing run alerts with evidence, a healthy one does not."""

from __future__ import annotations

from workbench.runs.telemetry.alerts import run_alerts_detect
from workbench.runs.telemetry.ingest import metrics_ingest


def store(run, steps: int, collapse_at: int | None):
    """Group std 0.5 and entropy 2.0 throughout, or both falling to a tenth after `collapse_at` while
    reward falls (RAGEN's echo trap; a fall with reward rising to its best is healthy sharpening)."""
    points = []
    for step in range(steps):
        late = collapse_at is not None and step >= collapse_at
        points += [
            (step, "reward/group_std_mean", 0.05 if late else 0.5),
            (step, "loss/entropy", 0.2 if late else 2.0),
            (step, "loss/grad_norm", 1.0),
            (step, "reward/mean", 0.2 if late else 0.4),
        ]
    metrics_ingest(run_id=run.pk, points=points)


def test_collapse_raises_an_echo_trap_alert_with_evidence(run):
    store(run, 60, collapse_at=30)
    alerts = {alert.rule: alert for alert in run_alerts_detect(run=run)}
    trap = alerts["echo_trap"]
    assert trap.severity == "critical" and 30 <= trap.step <= 35
    assert trap.evidence["std_fraction_of_peak"] < 0.3
    assert run.alerts.filter(rule="echo_trap").count() == 1


def test_detection_is_idempotent(run):
    store(run, 60, collapse_at=30)
    run_alerts_detect(run=run)
    first = run.alerts.count()
    run_alerts_detect(run=run)
    assert run.alerts.count() == first


def test_healthy_run_has_no_alert(run):
    store(run, 60, collapse_at=None)
    assert run_alerts_detect(run=run) == []


def test_disabled_detector_stores_nothing(run):
    run.config = {**run.config, "echo_trap": {**run.config["echo_trap"], "enabled": False}}
    run.save()
    store(run, 60, collapse_at=30)
    assert run_alerts_detect(run=run) == []
