"""Echo-trap and no-learning-signal detection (RAGEN, arXiv 2504.20073) over a run's stored series, with the
trainers detector."""

from __future__ import annotations

from trainers.workbench_api import EchoTrapDetector

from ..models import Alert, MetricPoint, Run
from .ingest import alerts_record


def run_alerts_detect(*, run: Run) -> list[Alert]:
    """Replay the run's stored std, entropy, grad-norm, reward and zero-variance series through the detector
    it was configured with, and store what fires (idempotent by step and rule, so it may run again)."""
    section = run.typed_config.echo_trap
    if not section.enabled:
        return []
    config = section.detector
    keys = [
        config.std_key,
        config.entropy_key,
        config.grad_norm_key,
        config.reward_key,
        config.zero_variance_key,
    ]
    points = MetricPoint.objects.filter(run=run, key__in=keys).order_by("step")
    series: dict[str, list[tuple[int, float]]] = {key: [] for key in keys}
    for key, step, value in points.values_list("key", "step", "value").iterator(chunk_size=10_000):
        series[key].append((step, value))
    return alerts_record(run_id=run.pk, alerts=EchoTrapDetector(config).detect(series))
