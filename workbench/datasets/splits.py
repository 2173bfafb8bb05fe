"""Train/eval split of a dataset version: by a ratio with a seed, or by the value of a column."""

from __future__ import annotations

import random
from typing import Any

TRAIN, EVAL = "train", "eval"
COLUMN_VALUES = {
    "train": TRAIN, "training": TRAIN,
    "eval": EVAL, "evaluation": EVAL, "test": EVAL,
    "validation": EVAL, "valid": EVAL, "val": EVAL, "dev": EVAL,
}  # fmt: skip


def split_from_value(value: Any) -> str:
    """Map a split column's cell to train/eval; raises ValueError naming the accepted values."""
    split = COLUMN_VALUES.get(str(value).strip().lower()) if value is not None else None
    if split is None:
        raise ValueError(f"split value {value!r} is not one of {', '.join(sorted(COLUMN_VALUES))}")
    return split


def eval_indices(n_rows: int, eval_ratio: float, seed: int) -> list[int]:
    """Exactly round(n_rows * eval_ratio) row indices, drawn without replacement by a seeded RNG (sorted)."""
    if not 0.0 <= eval_ratio < 1.0:
        raise ValueError("eval ratio must be in [0, 1)")
    k = round(n_rows * eval_ratio)
    return sorted(random.Random(seed).sample(range(n_rows), k))
