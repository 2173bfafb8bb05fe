"""Weights & Biases: offline files under the run directory unless WORKBENCH_WANDB_MODE=online (which needs
WANDB_API_KEY in the worker's environment)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainers.tracking.base import Tracker, TrackerRun


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, section: Any, run_dir: Path) -> None:
        self.section = section
        self.run_dir = run_dir
        self.mode = os.environ.get("WORKBENCH_WANDB_MODE", "offline")
        self._run: Any = None

    def start(self, run_name: str, config: dict[str, Any], resume_id: str | None) -> TrackerRun:
        if self.mode == "online" and not os.environ.get("WANDB_API_KEY"):
            raise RuntimeError("WORKBENCH_WANDB_MODE=online needs WANDB_API_KEY in the worker's environment")
        import wandb

        self._run = wandb.init(
            project=self.section.project,
            name=self.section.name or run_name,
            tags=list(self.section.tags),
            config=config,
            id=resume_id,
            resume="allow" if resume_id else None,
            mode=self.mode,
            dir=str(self.run_dir),
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )
        return TrackerRun(self._run.id, self._run.url or self._run.dir)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        import wandb

        columns = sorted({key for row in rows for key in row})
        table = wandb.Table(columns=columns, data=[[str(row.get(c, "")) for c in columns] for row in rows])
        self._run.log({"trajectories": table}, step=step)

    def finish(self) -> None:
        if self._run is not None:
            self._run.finish()
