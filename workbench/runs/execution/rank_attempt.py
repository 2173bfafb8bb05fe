"""One rank's part of a process group's attempt (process_group.py launches the group, rank.py is the
command each rank runs): train the attempt's launch file config from its checkpoint and record how it
ended in `rank-<r>.json`; rank 0 writes the run's database sink."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import traceback
from typing import Any

from trainers.workbench_api import run_config, validate_config

from ..models import Run
from .artifacts import CheckpointMirror, artifact_store
from .process_group import group_dir
from .sink import DatabaseSink
from .worker import CancelPoller, run_dir

logger = logging.getLogger(__name__)


def rank_main(run_id: int, attempt: int) -> int:
    """Train this rank's part of the attempt; its end record says how it ended (exit 1 when it raised)."""
    rank = int(os.environ["RANK"])
    _watch_parent()
    run = Run.objects.get(pk=run_id)
    directory = group_dir(run_dir(run), attempt)
    launch = json.loads((directory / "launch.json").read_text())
    config, resume_from = validate_config(launch["config"]), launch["resume_from"]
    terminated = threading.Event()  # torchrun passes SIGTERM on: stop after this step, as one process
    signal.signal(signal.SIGTERM, lambda *_: terminated.set())
    cancel = CancelPoller(run_id)
    sink = None
    if rank == 0:
        sink = DatabaseSink(run_id, attempt=attempt)
        sink.checkpoints = CheckpointMirror(
            run_id, run_dir(run), store=artifact_store(), keep=config.checkpoint.keep
        )
    start = f"resuming from {resume_from}" if resume_from else "from the start"
    logger.info(
        "run %s attempt %s: rank %s of %s, %s", run_id, attempt, rank, os.environ["WORLD_SIZE"], start
    )
    record: dict[str, Any] = {"rank": rank, "error": "", "stopped": False, "cancelled": False, "steps": 0}
    try:
        result = run_config(
            config, sink=sink, should_stop=lambda: terminated.is_set() or cancel(), resume_from=resume_from
        )
        if sink is not None:
            sink.close()
        record.update(stopped=result.stopped, cancelled=cancel.cancelled, steps=result.steps_done)
    except Exception as exc:
        logger.exception("run %s rank %s failed", run_id, rank)
        record["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    record.update(terminated=terminated.is_set(), at=time.time())
    end = "raised" if record["error"] else f"at step {record['steps']}"
    logger.info("run %s attempt %s: rank %s ended %s", run_id, attempt, rank, end)
    path = directory / f"rank-{rank}.json"
    path.with_suffix(".tmp").write_text(json.dumps(record))
    path.with_suffix(".tmp").replace(path)
    return 1 if record["error"] else 0


def _watch_parent() -> None:
    """End this rank when torchrun is gone (killed): an orphaned rank 0 would go on writing the run."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="group-parent", daemon=True).start()
