"""Echo-trap detection over stored series: a collapsing run alerts with evidence, a healthy one does not."""

from __future__ import annotations

from django.urls import reverse

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


def test_a_run_with_no_learning_signal_is_flagged_in_plain_words(run, client_for, member):
    """Every group scored alike for the whole run (reward 0 everywhere): one `no_signal` alert, five steps
    in, whose words say what it means; the run's page shows it."""
    points = []
    for step in range(1, 31):
        points += [(step, "reward/zero_variance_frac", 1.0), (step, "reward/mean", 0.0)]
    metrics_ingest(run_id=run.pk, points=points)
    alerts = run_alerts_detect(run=run)
    assert [(a.rule, a.step, a.start_step) for a in alerts] == [("no_signal", 5, 1)]
    assert alerts[0].message.startswith(
        "Every group had equal rewards on every step from 1 to 5: their advantages are zero, so the policy"
        " learns nothing from them. Reward mean is 0"
    )
    page = client_for(member).get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "no_signal" in page and "so the policy learns nothing from them" in page
