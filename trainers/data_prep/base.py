"""The preparer interface: a pure function from JSONL rows to the rows to train on, with drop reasons."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainers.registry import Registry


@dataclass
class Prepared:
    """What a preparer made: output rows, how many input rows it kept, and dropped input rows by reason."""

    rows: list[dict[str, Any]]
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {"kept": self.kept, "dropped": dict(sorted(self.dropped.items())), "rows_out": len(self.rows)}


Preparer = Callable[[list[dict[str, Any]]], Prepared]

PREPARERS: Registry[Preparer] = Registry("dataset preparer")
