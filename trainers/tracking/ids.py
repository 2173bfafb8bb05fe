"""`tracking.json` in the run directory, next to the checkpoints: where the run is mirrored, so that a
resumed run continues the same tracker runs."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from trainers.tracking.base import TrackerRun

IDS_FILE = "tracking.json"
_lock = threading.Lock()


def read_tracker_runs(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Tracker name -> {"id", "url"} (empty when none has started)."""
    path = Path(run_dir) / IDS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record_tracker_run(run_dir: str | Path, name: str, run: TrackerRun) -> None:
    """Add (or replace) one tracker's run; trackers start on their own threads."""
    with _lock:
        runs = read_tracker_runs(run_dir)
        runs[name] = {"id": run.id, "url": run.url}
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / IDS_FILE).write_text(json.dumps(runs, indent=1), encoding="utf-8")
