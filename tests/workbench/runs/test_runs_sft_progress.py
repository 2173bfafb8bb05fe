"""The SFT warm start on the dashboard: its steps stored as sft/* series (leaving the run's RL step alone),
charted while the run is still in SFT, and its progress on the status strip."""

from __future__ import annotations

from django.urls import reverse

from workbench.runs.models import MetricPoint
from workbench.runs.sink import DatabaseSink


def sft_step(step: int, total: int = 50) -> dict[str, float]:
    return {"sft/loss": 5.0 / step, "sft/grad_norm": 1.0, "sft/lr": 1e-3, "sft/progress": step / total}


def test_sft_steps_are_stored_without_moving_the_rl_step(run):
    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=0.0)
    for step in range(1, 41):
        sink.log_sft(step, sft_step(step))
    run.refresh_from_db()
    assert run.last_step is None  # the strip's "step" is the RL step; SFT has its own progress
    losses = MetricPoint.objects.filter(run=run, key="sft/loss").order_by("step")
    assert list(losses.values_list("step", flat=True)) == list(range(1, 41))
    sink.log_metrics(1, {"reward/mean": 0.5})
    sink.close()
    run.refresh_from_db()
    assert run.last_step == 1


def test_the_dashboard_charts_sft_while_no_rl_step_exists(client_for, member, run):
    sink = DatabaseSink(run.id, flush_points=1000, flush_seconds=0.0)
    for step in range(1, 31):
        sink.log_sft(step, sft_step(step))
    client = client_for(member)
    url = reverse("runs:series", args=[run.pk]) + "?keys=sft/loss,sft/progress&available=1"
    payload = client.get(url).json()
    assert payload["last_step"] is None
    assert payload["series"]["sft/loss"]["x"] == list(range(1, 31))
    assert payload["series"]["sft/progress"]["y"][-1] == 30 / 50
    assert {"sft/loss", "sft/progress"} <= set(payload["available"])
    body = client.get(reverse("runs:status", args=[run.pk])).content.decode()
    assert "SFT 60%" in body and 'data-sft-step="30"' in body


def test_sft_and_rl_series_each_get_their_own_step_window(client_for, member, run):
    """A long SFT stage must not widen the buckets of a short RL run's charts (and the reverse)."""
    sink = DatabaseSink(run.id, flush_points=10_000, flush_seconds=60.0)
    for step in range(1, 2001):
        sink.log_sft(step, sft_step(step, total=2000))
    for step in range(1, 11):
        sink.log_metrics(step, {"reward/mean": step / 10})
    sink.close()
    client = client_for(member)
    series = reverse("runs:series", args=[run.pk])
    rl = client.get(series + "?keys=reward/mean&buckets=50").json()["series"]["reward/mean"]
    sft = client.get(series + "?keys=sft/loss&buckets=50").json()["series"]["sft/loss"]
    assert rl["x"] == list(range(1, 11))  # every RL step, not buckets 40 steps wide
    assert sft["x"][-1] == 2000 and len(sft["x"]) <= 3 * 50


def test_dashboard_page_lists_the_sft_series(client_for, member, run):
    DatabaseSink(run.id, flush_seconds=0.0).log_sft(1, sft_step(1))
    response = client_for(member).get(run.get_absolute_url())
    assert "sft/loss" in response.context["keys"]
