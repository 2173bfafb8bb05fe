"""Services that write what a worker streams back: batched, idempotent upserts keyed by (run, step, key)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from django.utils.module_loading import import_string

from trainers.workbench_api import Trajectory

from ..models import Alert, AlertSeverity, Checkpoint, MetricPoint, Run, TrajectoryRecord
from ..trajectories.records import TRAJECTORY_FIELDS, clean_text, storable, trajectory_record
from .rollups import rollups_refresh

logger = logging.getLogger(__name__)
MetricTriple = tuple[int, str, float]


def _finite_points(points: Iterable[MetricTriple]) -> dict[tuple[str, int], float]:
    """Last value wins inside a batch; NaN/inf are dropped because charts and min/max cannot use them."""
    out: dict[tuple[str, int], float] = {}
    for step, key, value in points:
        value = float(value)
        if math.isfinite(value):
            out[(clean_text(str(key)), int(step))] = value
    return out


def _stored(run_id: int, **fields: Any) -> None:
    """Note on the run's row that more of what it streams was stored (and set `fields`), in the caller's
    transaction: pages that poll compare `data_version`, so they see the write as soon as it commits."""
    Run.objects.filter(pk=run_id).update(data_version=F("data_version") + 1, **fields)


def phase_record(*, run_id: int, phase: str) -> None:
    """The phase the run's attempt reports (status strip: "saving a checkpoint", "starting RL")."""
    Run.objects.filter(pk=run_id).update(phase=phase)


def _advance_run(run_id: int, step: int) -> None:
    """Move the run's high-water step and heartbeat forward (never backwards on a replayed batch)."""
    _stored(
        run_id,
        last_step=Greatest(Coalesce(F("last_step"), Value(step)), Value(step)),
        heartbeat_at=timezone.now(),
    )


@transaction.atomic
def metrics_ingest(*, run_id: int, points: Iterable[MetricTriple], advance_step: bool = True) -> int:
    """Upsert (step, key, value) points and refresh the chart pyramid; returns how many were written.
    `advance_step=False` for series numbered apart from the RL steps (the SFT warm start's)."""
    values = _finite_points(points)
    if not values:
        return 0
    MetricPoint.objects.bulk_create(
        [MetricPoint(run_id=run_id, key=key, step=step, value=v) for (key, step), v in values.items()],
        batch_size=5000,
        update_conflicts=True,
        unique_fields=["run", "key", "step"],
        update_fields=["value"],
    )
    steps = [step for _, step in values]
    keys = sorted({key for key, _ in values})
    rollups_refresh(run_id=run_id, keys=keys, step_lo=min(steps), step_hi=max(steps))
    if advance_step:
        _advance_run(run_id, max(steps))
    else:
        _stored(run_id)
    return len(values)


@transaction.atomic
def trajectories_ingest(*, run_id: int, batches: Mapping[int, Sequence[Trajectory]]) -> int:
    """Upsert trajectories by (run, step, group/sample); a replayed step replaces its rows."""
    records = [
        trajectory_record(run_id=run_id, step=step, traj=traj)
        for step, trajs in batches.items()
        for traj in trajs
    ]
    TrajectoryRecord.objects.bulk_create(
        records,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["run", "step", "key"],
        update_fields=TRAJECTORY_FIELDS,
    )
    if records:
        _stored(run_id)
    return len(records)


@transaction.atomic
def checkpoint_record(*, run_id: int, step: int, path: str, url: str = "") -> Checkpoint:
    """Record a saved checkpoint (`url`: its copy in the artifact store); the run resumes from the newest
    one when its task is redelivered. A new one is handed to the checkpoint services once committed."""
    fields = {"path": path, "url": url}
    checkpoint, created = Checkpoint.objects.update_or_create(run_id=run_id, step=step, defaults=fields)
    _stored(run_id, last_checkpoint_step=step)
    if created:
        transaction.on_commit(partial(checkpoint_services_call, checkpoint.pk))
    return checkpoint


def checkpoint_services_call(checkpoint_id: int) -> None:
    """Call each of settings.RUNS_CHECKPOINT_SERVICES with the checkpoint (the evaluations app schedules
    its evaluations); a service that fails is logged: it must never fail the run that recorded it."""
    checkpoint = Checkpoint.objects.select_related("run").filter(pk=checkpoint_id).first()
    for name in settings.RUNS_CHECKPOINT_SERVICES if checkpoint is not None else []:
        try:
            import_string(name)(checkpoint=checkpoint)
        except Exception:
            logger.exception("checkpoint %s: %s failed", checkpoint_id, name)


def _alert_fields(alert: Any) -> dict[str, Any]:
    """Accept the detector's alert objects (attributes) or plain dicts with the same names."""
    if isinstance(alert, Mapping):
        get = alert.get
    else:
        get = lambda name, default=None: getattr(alert, name, default)  # noqa: E731
    evidence = get("evidence", {}) or {}
    return {
        "step": int(get("step")),
        "rule": clean_text(str(get("rule"))),
        "message": clean_text(str(get("message", "") or "")),
        "evidence": storable(dict(evidence) if isinstance(evidence, Mapping) else {"detail": str(evidence)}),
        "severity": str(get("severity", AlertSeverity.WARNING) or AlertSeverity.WARNING),
        "start_step": get("start_step"),
    }


@transaction.atomic
def alerts_record(*, run_id: int, alerts: Iterable[Any]) -> list[Alert]:
    """Store detector alerts idempotently by (run, step, rule)."""
    stored = []
    for alert in alerts:
        fields = _alert_fields(alert)
        obj, _ = Alert.objects.update_or_create(
            run_id=run_id, step=fields.pop("step"), rule=fields.pop("rule"), defaults=fields
        )
        stored.append(obj)
    if stored:
        _stored(run_id)
    return stored
