"""MLflow: a run in the experiment named by the config, on WORKBENCH_MLFLOW_TRACKING_URI (default: a file
store in <run dir>/mlruns, which MLflow 3 keeps in maintenance mode and allows only when asked to)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from trainers.tracking.base import Tracker, TrackerRun

_INVALID = re.compile(r"[^\w\-. :/]")  # MLflow's metric-name alphabet


class MlflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, section: Any, run_dir: Path) -> None:
        self.section = section
        self.uri = os.environ.get("WORKBENCH_MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
        self._client: Any = None
        self._run_id = ""

    def start(self, run_name: str, config: dict[str, Any], resume_id: str | None) -> TrackerRun:
        if self.uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient

        self._client = MlflowClient(tracking_uri=self.uri)
        if resume_id is not None:
            self._client.update_run(resume_id, status="RUNNING")
            self._run_id = resume_id
        else:
            experiment = self._client.get_experiment_by_name(self.section.experiment)
            experiment_id = (
                experiment.experiment_id
                if experiment
                else self._client.create_experiment(self.section.experiment)
            )
            run = self._client.create_run(experiment_id, run_name=run_name, tags=dict(self.section.tags))
            self._run_id = run.info.run_id
            params = {k: json.dumps(v, default=str)[:500] for k, v in config.items()}
            self._client.log_dict(self._run_id, params, "run_config.json")
        return TrackerRun(self._run_id, f"{self.uri}#{self._run_id}")

    def _experiment_id(self) -> str:
        name = self.section.experiment
        experiment = self._client.get_experiment_by_name(name)
        return experiment.experiment_id if experiment else self._client.create_experiment(name)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(_INVALID.sub("_", key), float(value), now, step) for key, value in metrics.items()]
        self._client.log_batch(self._run_id, metrics=batch)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        self._client.log_dict(self._run_id, rows, f"trajectories/step_{step:06d}.json")

    def finish(self) -> None:
        if self._client is not None and self._run_id:
            self._client.set_terminated(self._run_id)
