"""Trackio: a run in the config's project, stored in WORKBENCH_TRACKIO_DIR (default: Trackio's own; it is
read when trackio is first imported in the process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainers.tracking.base import Tracker, TrackerRun


class TrackioTracker(Tracker):
    name = "trackio"

    def __init__(self, section: Any, run_dir: Path) -> None:
        self.section = section
        self._run: Any = None

    def start(self, run_name: str, config: dict[str, Any], resume_id: str | None) -> TrackerRun:
        if os.environ.get("WORKBENCH_TRACKIO_DIR"):
            os.environ["TRACKIO_DIR"] = os.environ["WORKBENCH_TRACKIO_DIR"]
        import trackio

        name = resume_id or f"{run_name}-{os.urandom(3).hex()}"
        self._run = trackio.init(
            project=self.section.project, name=name, config=config, resume="must" if resume_id else "never",
            embed=False, auto_log_gpu=False, auto_log_cpu=False,
        )  # fmt: skip
        return TrackerRun(self._run.name, f"trackio:{self.section.project}/{self._run.name}")

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def finish(self) -> None:
        if self._run is not None:
            self._run.finish()
