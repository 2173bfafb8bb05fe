"""`MirrorSink`: the run's own sink, plus copies of its metrics handed to experiment trackers.

Each tracker gets a `TrackerWorker` (a bounded queue and a daemon thread): a tracker that is down, slow
or raising never slows or fails training. Drops and tracker errors are logged and reported in the run's
own metrics (`tracking/dropped`, `tracking/errors`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainers.tracking.base import Tracker, build_tracker
from trainers.tracking.ids import read_tracker_runs, record_tracker_run
from trainers.tracking.worker import TrackerWorker
from trainers.training.sinks import Phase, Sink
from trainers.trajectory import Trajectory

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig

logger = logging.getLogger(__name__)


def with_mirrors(config: RunConfig, sink: Sink, *, resume: bool) -> Sink:
    """`sink` alone when the config mirrors nowhere; otherwise a `MirrorSink` around it that continues the
    tracker runs recorded in the run directory when `resume`."""
    enabled = config.tracking.enabled() if config.tracking is not None else {}
    if not enabled:
        return sink
    run_dir = Path(config.output_dir)
    trackers = [build_tracker(name, section, run_dir) for name, section in enabled.items()]
    snapshot = config.model_dump(mode="json", exclude={"tracking"})
    return MirrorSink(sink, trackers, run_dir, run_name=config.name, config=snapshot, resume=resume)


class MirrorSink(Sink):
    """Forwards every record to `inner` and mirrors metrics, evaluations and a sample of trajectories.

    Each tracker starts on its own thread (continuing the run recorded in `tracking.json` when `resume`)
    and records its run there. `close_timeout_s` bounds how long `close` waits for the trackers.
    """

    def __init__(
        self,
        inner: Sink,
        trackers: Sequence[Tracker],
        run_dir: str | Path,
        *,
        run_name: str = "run",
        config: dict[str, Any] | None = None,
        resume: bool = False,
        queue_size: int = 1000,
        samples: int = 4,
        close_timeout_s: float = 30.0,
    ) -> None:
        self.inner = inner
        self.run_dir = Path(run_dir)
        self.samples = samples
        self.close_timeout_s = close_timeout_s
        known = read_tracker_runs(self.run_dir) if resume else {}
        self.workers = [TrackerWorker(tracker, queue_size) for tracker in trackers]
        for worker in self.workers:
            resume_id = known.get(worker.tracker.name, {}).get("id")
            worker.put(self._start, worker.tracker, run_name, config or {}, resume_id)

    def _start(self, tracker: Tracker, run_name: str, config: dict[str, Any], resume_id: str | None) -> None:
        run = tracker.start(run_name, config, resume_id)
        record_tracker_run(self.run_dir, tracker.name, run)
        logger.info("run mirrored to %s: %s", tracker.name, run.url or run.id)

    @property
    def dropped(self) -> int:
        return sum(w.dropped for w in self.workers)

    @property
    def errors(self) -> int:
        return sum(w.errors for w in self.workers)

    def _mirror(self, what: str, *args: Any) -> None:
        for worker in self.workers:
            worker.put(getattr(worker.tracker, what), *args)

    def log_phase(self, phase: Phase) -> None:
        self.inner.log_phase(phase)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        if self.dropped or self.errors:
            counts = {"tracking/dropped": float(self.dropped), "tracking/errors": float(self.errors)}
            metrics = {**metrics, **counts}
        self.inner.log_metrics(step, metrics)
        self._mirror("log_metrics", step, dict(metrics))

    def log_trajectories(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        self.inner.log_trajectories(step, trajectories)
        if self.samples > 0 and trajectories:
            self._mirror("log_samples", step, [_sample(t) for t in trajectories[: self.samples]])

    def log_eval(self, step: int, results: dict[str, float]) -> None:
        self.inner.log_eval(step, results)
        self._mirror("log_metrics", step, {f"eval/{k}": v for k, v in results.items() if _number(v)})

    def log_checkpoint(self, step: int, path: Path) -> None:
        self.inner.log_checkpoint(step, path)

    def log_alerts(self, alerts: Sequence[Any]) -> None:
        self.inner.log_alerts(alerts)

    def log_sft(self, step: int, metrics: dict[str, float]) -> None:
        self.inner.log_sft(step, metrics)  # SFT steps restart at 1: not mirrored, trackers want one axis

    def close(self) -> None:
        """Close the run's sink, then give the trackers up to `close_timeout_s` to finish."""
        self.inner.close()
        for worker in self.workers:
            if not worker.stop(self.close_timeout_s):
                logger.warning("tracker %s did not finish in time; left behind", worker.tracker.name)
        if self.dropped or self.errors:
            logger.warning("metric mirrors: %d records dropped, %d tracker errors", self.dropped, self.errors)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _sample(trajectory: Trajectory) -> dict[str, Any]:
    """One row of the trajectory table: what a reader scans first."""
    return {
        "uid": trajectory.uid,
        "group": trajectory.group_id,
        "reward": trajectory.reward,
        "prompt": trajectory.prompt_text,
        "response": "".join(t.text for t in trajectory.response_turns),
        "final_answer": trajectory.final_answer,
    }
