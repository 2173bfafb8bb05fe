"""The interface every tracker implements, and the registry that builds one from a run config's section."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrackerRun:
    """Where a run is mirrored: the tracker's run id (kept for resume) and a URL or path to open it."""

    id: str
    url: str | None = None


class Tracker(ABC):
    """One experiment tracker. Its methods run on the mirror's thread, never on the training loop's."""

    name: str = ""

    @abstractmethod
    def start(self, run_name: str, config: dict[str, Any], resume_id: str | None) -> TrackerRun:
        """Open (or, with `resume_id`, continue) the tracker's run."""

    @abstractmethod
    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:  # noqa: B027 (optional)
        """A sample of the step's trajectories as a table, where the tracker has one."""

    @abstractmethod
    def finish(self) -> None: ...


# name -> "module:class"; a tracker's module (and its SDK) is imported only when a config names it
TRACKERS: dict[str, str] = {
    "tensorboard": "trainers.tracking.tensorboard:TensorBoardTracker",
    "mlflow": "trainers.tracking.mlflow:MlflowTracker",
    "wandb": "trainers.tracking.wandb:WandbTracker",
    "trackio": "trainers.tracking.trackio:TrackioTracker",
}


def build_tracker(name: str, section: Any, run_dir: Path) -> Tracker:
    """The tracker registered under `name`, built from its config section and the run directory."""
    module, cls = TRACKERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(section, run_dir)
