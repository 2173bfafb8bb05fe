"""A dataset version's rows as the JSONL the trainers read (`data.train_path`, `data.eval_path`), written
on the worker that trains or evaluates."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.datasets.models import DatasetVersion


def write_split_rows(version: DatasetVersion, split: str, path: Path) -> Path:
    """The split's prompt rows, in index order, one JSON object a line (empty when the split is)."""
    with path.open("w", encoding="utf-8") as handle:
        for row in version.rows.filter(split=split).order_by("index").iterator(chunk_size=2000):
            record = {
                "id": f"row{row.index}",
                "question": row.prompt,
                "answer": row.answer,
                "tool_calls": row.tool_calls,
                "initial_state": row.initial_state,
                "ground_truth": row.ground_truth(),
                "metadata": row.metadata,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
