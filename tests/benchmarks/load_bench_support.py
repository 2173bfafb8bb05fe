"""The training side of bench_load.py: a worker's run of the tiny model, noting what the trainer logged.

`python tests/benchmarks/load_bench_support.py RUN_ID STAMPS` trains the run through the worker's own
code path (`run_execute`: claim, lease, DatabaseSink, `run_config`) and appends one JSON line per
`log_metrics` / `log_trajectories` call to STAMPS: when the trainer handed the step over and which keys,
so the benchmark can measure how late they became visible and whether any were lost.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")


def storable_keys(metrics: dict[str, Any]) -> list[str]:
    """The keys DatabaseSink stores: finite numbers (booleans and NaN/inf are not points)."""
    return [
        key
        for key, value in metrics.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ]


class Stamped:
    """Passes everything to the run's sink and notes each step's metrics and trajectories on the way."""

    def __init__(self, sink: Any, out: TextIO) -> None:
        self._sink, self._out = sink, out

    def _note(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps({**record, "t": time.time()}) + "\n")
        self._out.flush()

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._note({"step": step, "keys": storable_keys(metrics)})
        self._sink.log_metrics(step, metrics)

    def log_trajectories(self, step: int, trajectories: Sequence[Any]) -> None:
        self._note({"step": step, "trajectories": [f"{t.group_id}/{t.sample_index}" for t in trajectories]})
        self._sink.log_trajectories(step, trajectories)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)


def main(run_id: int, stamps: Path) -> int:
    import django
    import torch

    django.setup()
    from trainers.workbench_api import run_config
    from workbench.runs.execution.worker import run_execute

    torch.set_num_threads(1)  # the web server and the simulated users share the machine
    with stamps.open("a", encoding="utf-8") as out:

        def train(config, *, sink, should_stop, resume_from=None):
            return run_config(
                config, sink=Stamped(sink, out), should_stop=should_stop, resume_from=resume_from
            )

        status = run_execute(run_id=run_id, worker="bench-load@localhost", train=train)
    print(f"run {run_id}: {status}")
    return 0 if status in ("succeeded", "cancelled") else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), Path(sys.argv[2])))
