"""Each tracker's own reader of what a run mirrored to it: step -> metrics."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

Steps = dict[int, dict[str, Any]]


def tensorboard_steps(log_dir: Path, key: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return [event.step for event in events.Scalars(key)]


def mlflow_steps(uri: str, run_id: str, key: str) -> list[int]:
    from mlflow import MlflowClient

    return [m.step for m in MlflowClient(tracking_uri=uri).get_metric_history(run_id, key)]


def trackio_steps(project: str, run: str, key: str) -> list[int]:
    from trackio.sqlite_storage import SQLiteStorage

    return [row["step"] for row in SQLiteStorage.get_logs(project, run) if key in row]


def _wandb_records(path: Path) -> list[bytes]:
    """The leveldb-style log of a `.wandb` file: a 7-byte file header, 32 KiB blocks of chunks."""
    data, block, out, pending = path.read_bytes(), 32768, [], b""
    offset = 7
    while offset + 7 <= len(data):
        room = block - offset % block
        if room < 7:
            offset += room
            continue
        _, length, kind = struct.unpack("<IHB", data[offset : offset + 7])
        chunk = data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        if kind == 0 and length == 0:
            break
        pending += chunk
        if kind in (1, 4):  # full, last
            out.append(pending)
            pending = b""
    return out


def wandb_steps(wandb_root: Path, run_id: str, key: str) -> list[int]:
    from wandb.proto.wandb_internal_pb2 import Record

    # an offline run resumed offline writes one directory per attempt, all with the run's id
    paths = sorted(wandb_root.glob(f"wandb/*run-*-{run_id}/run-{run_id}.wandb"))
    steps = []
    for raw in (raw for path in paths for raw in _wandb_records(path)):
        record = Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            items = {"/".join(i.nested_key) or i.key: i.value_json for i in record.history.item}
            if key in items:
                steps.append(int(json.loads(items["_step"])))
    return steps
