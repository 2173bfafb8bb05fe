"""Training prompts: JSONL rows and a sampler whose state goes into checkpoints (exact resume)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from trainers.training.checkpoint import python_rng_state, set_python_rng_state


def read_rows(path: str | Path, prompt_key: str = "question") -> list[dict[str, Any]]:
    """Rows of a JSONL file; each needs `prompt_key` (copied to `question`, which the engine reads)."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if prompt_key not in row:
            raise ValueError(f"{path}:{number}: row has no {prompt_key!r} field")
        row.setdefault("id", f"row{number}")
        row["question"] = row[prompt_key]
        rows.append(row)
    return rows


def split_rows(rows: list[dict], eval_fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out a random `eval_fraction` of rows for evaluation."""
    if eval_fraction <= 0:
        return rows, []
    shuffled = random.Random(seed).sample(rows, len(rows))
    n_eval = max(1, int(len(rows) * eval_fraction))
    return shuffled[n_eval:], shuffled[:n_eval]


class PromptSampler:
    """Epochs over the rows in a fresh random order; `state_dict` makes resumed runs see the same prompts."""

    def __init__(self, rows: list[dict], seed: int = 0) -> None:
        if not rows:
            raise ValueError("no training rows")
        self.rows = rows
        self.rng = random.Random(seed)
        self.order: list[int] = []

    def next(self, n: int) -> list[dict]:
        out = []
        for _ in range(n):
            if not self.order:
                self.order = self.rng.sample(range(len(self.rows)), len(self.rows))
            out.append(self.rows[self.order.pop()])
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"rng": python_rng_state(self.rng), "order": list(self.order)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_python_rng_state(state["rng"], self.rng)
        self.order = [int(i) for i in state["order"]]
