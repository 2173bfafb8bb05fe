"""TensorBoard: event files under WORKBENCH_TENSORBOARD_ROOT (default: the run directory)/<name>."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainers.tracking.base import Tracker, TrackerRun


class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def __init__(self, section: Any, run_dir: Path) -> None:
        root = Path(os.environ.get("WORKBENCH_TENSORBOARD_ROOT") or run_dir)
        self.log_dir = root / section.name
        self._resumed = False
        self._writer: Any = None

    def start(self, run_name: str, config: dict[str, Any], resume_id: str | None) -> TrackerRun:
        self._resumed = resume_id is not None
        return TrackerRun(str(self.log_dir), str(self.log_dir))

    def _open(self, step: int) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            # a resumed run drops what the crashed attempt logged past its checkpoint
            self._writer = SummaryWriter(str(self.log_dir), purge_step=step if self._resumed else None)
        return self._writer

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        writer = self._open(step)
        for key, value in metrics.items():
            writer.add_scalar(key, value, step)
        writer.flush()

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        text = "\n\n".join(f"```\n{json.dumps(row, ensure_ascii=False)}\n```" for row in rows)
        self._open(step).add_text("trajectories", text, step)

    def finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
