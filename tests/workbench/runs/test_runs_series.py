"""Downsampled chart series keep every spike, dip and the last value, and stay small."""

from __future__ import annotations

import pytest
from django.db.models import Max

from workbench.runs.models import MetricRollup
from workbench.runs.telemetry.ingest import metrics_ingest
from workbench.runs.telemetry.rollups import Agg
from workbench.runs.telemetry.series import Window, _points, _source_sql, series_downsample, series_keys

STEPS = 10_000


@pytest.fixture
def spiky_run(run):
    """grad_norm is 1.0 everywhere except a spike of 80 at step 4321 and a dip to -5 at step 777."""
    values = {step: 1.0 for step in range(STEPS)}
    values[4321], values[777], values[STEPS - 1] = 80.0, -5.0, 2.5
    metrics_ingest(run_id=run.id, points=[(s, "grad_norm", v) for s, v in values.items()])
    metrics_ingest(run_id=run.id, points=[(s, "entropy", 3.0) for s in range(STEPS)])
    run.refresh_from_db()
    return run


def test_spike_and_dip_survive_downsampling(spiky_run):
    points = dict(series_downsample(run=spiky_run, keys=["grad_norm"], buckets=50)["grad_norm"])
    assert points[4321] == 80.0
    assert points[777] == -5.0


def test_last_value_is_kept(spiky_run):
    points = series_downsample(run=spiky_run, keys=["grad_norm"], buckets=50)["grad_norm"]
    assert points[-1] == (STEPS - 1, 2.5)


def test_output_is_bounded_by_buckets(spiky_run):
    series = series_downsample(run=spiky_run, keys=["grad_norm", "entropy"], buckets=50)
    assert all(len(points) <= 3 * 51 for points in series.values())
    assert [step for step, _ in series["grad_norm"]] == sorted(step for step, _ in series["grad_norm"])


def test_zoomed_range_returns_raw_points(spiky_run):
    points = series_downsample(run=spiky_run, keys=["grad_norm"], step_min=4300, step_max=4340, buckets=400)
    assert points["grad_norm"] == [(s, 80.0 if s == 4321 else 1.0) for s in range(4300, 4341)]


def test_overwritten_spike_leaves_no_stale_extreme(run):
    metrics_ingest(run_id=run.id, points=[(s, "kl", 0.0) for s in range(64)] + [(5, "kl", 9.0)])
    metrics_ingest(run_id=run.id, points=[(5, "kl", 0.5)])
    assert MetricRollup.objects.filter(run=run, key="kl").aggregate(top=Max("max_value"))["top"] == 0.5


def test_series_keys_lists_logged_series(spiky_run):
    assert series_keys(run=spiky_run) == ["entropy", "grad_norm"]


def test_merge_keeps_extremes_with_their_steps_and_the_later_last():
    merged = Agg.point(3, 2.0).merge(Agg.point(9, -1.0)).merge(Agg.point(6, 7.0))
    assert merged == Agg(min_value=-1.0, min_step=9, max_value=7.0, max_step=6, last_value=-1.0, last_step=9)


@pytest.mark.parametrize(("lo", "hi", "buckets"), [(0, STEPS - 1, 37), (100, 5000, 300), (4000, 4400, 400)])
def test_postgres_and_portable_sql_agree(spiky_run, lo, hi, buckets):
    window = Window(lo=lo, hi=hi, buckets=buckets)
    source, params = _source_sql(window, spiky_run.pk, ["grad_norm", "entropy"])
    fast = sorted(set(_points(source, params, window, postgres=True)))
    portable = sorted(set(_points(source, params, window, postgres=False)))
    assert fast == portable
