"""`MirrorSink`: the run's own sink, plus copies of its metrics handed to experiment trackers.

Each tracker gets a bounded queue and a daemon thread: a tracker that is down, slow or raising never
slows or fails training. A record that finds its queue full is dropped; drops and tracker errors are
counted, logged, and reported in the run's own metrics (`tracking/dropped`, `tracking/errors`).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainers.tracking.base import Tracker, TrackerRun
from trainers.training.sinks import Phase, Sink
from trainers.trajectory import Trajectory

logger = logging.getLogger(__name__)

IDS_FILE = "tracking.json"  # next to the checkpoints: the tracker run ids a resumed run continues
_STOP = object()


def read_tracker_runs(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The trackers a run is mirrored to: name -> {"id", "url"} (empty when none started)."""
    path = Path(run_dir) / IDS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


class _Mirror:
    """One tracker behind its queue and thread."""

    def __init__(self, tracker: Tracker, size: int) -> None:
        self.tracker = tracker
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self.dropped = 0
        self.errors = 0
        self.thread = threading.Thread(target=self._drain, name=f"mirror-{tracker.name}", daemon=True)

    def put(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            if not self.dropped:
                logger.warning("tracker %s is behind: dropping records", self.tracker.name)
            self.dropped += 1

    def _call(self, method: Callable[..., Any], *args: Any) -> None:
        try:
            method(*args)
        except Exception:  # a tracker failing must never reach the run
            self.errors += 1
            if self.errors == 1 or self.errors % 100 == 0:
                name = getattr(method, "__name__", "call")
                logger.exception("tracker %s: %s failed (%d errors)", self.tracker.name, name, self.errors)

    def _drain(self) -> None:
        while (item := self.queue.get()) is not _STOP:
            self._call(*item)
        self._call(self.tracker.finish)


class MirrorSink(Sink):
    """Forwards every record to `inner` and mirrors metrics, evaluations and a sample of trajectories.

    `start` runs on each tracker's thread: `on_start(name, run)` records where the run is mirrored.
    `close_timeout_s` bounds how long `close` waits for the trackers to catch up.
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
        self._ids_lock = threading.Lock()
        known = read_tracker_runs(self.run_dir) if resume else {}
        self.mirrors = [_Mirror(tracker, queue_size) for tracker in trackers]
        for mirror in self.mirrors:
            resume_id = known.get(mirror.tracker.name, {}).get("id")
            mirror.put((self._start, mirror, run_name, config or {}, resume_id))
            mirror.thread.start()

    def _start(self, mirror: _Mirror, run_name: str, config: dict[str, Any], resume_id: str | None) -> None:
        run = mirror.tracker.start(run_name, config, resume_id)
        self._record(mirror.tracker.name, run)

    def _record(self, name: str, run: TrackerRun) -> None:
        with self._ids_lock:
            runs = read_tracker_runs(self.run_dir)
            runs[name] = {"id": run.id, "url": run.url}
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / IDS_FILE).write_text(json.dumps(runs, indent=1), encoding="utf-8")
        logger.info("run mirrored to %s: %s", name, run.url or run.id)

    @property
    def dropped(self) -> int:
        return sum(m.dropped for m in self.mirrors)

    @property
    def errors(self) -> int:
        return sum(m.errors for m in self.mirrors)

    def _mirror(self, what: str, *args: Any) -> None:
        for mirror in self.mirrors:
            mirror.put((getattr(mirror.tracker, what), *args))

    def log_phase(self, phase: Phase) -> None:
        self.inner.log_phase(phase)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        if self.dropped or self.errors:
            metrics = {
                **metrics,
                "tracking/dropped": float(self.dropped),
                "tracking/errors": float(self.errors),
            }
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
        for mirror in self.mirrors:
            mirror.put(_STOP)
        for mirror in self.mirrors:
            mirror.thread.join(self.close_timeout_s)
            if mirror.thread.is_alive():
                logger.warning("tracker %s did not finish in time; left behind", mirror.tracker.name)
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
