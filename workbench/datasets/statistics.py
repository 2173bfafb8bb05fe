"""Per-field statistics of an upload, accumulated one record at a time (constant memory per field)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

EXAMPLE_CHARS = 80
_FLOAT_MAX_BITS = 1023  # larger integers overflow float(); their statistics leave them out


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


@dataclass
class _Running:
    """Count, min, max and mean of a stream of finite numbers (a running mean: a sum of large values
    would overflow to inf, which JSON cannot hold)."""

    count: int = 0
    low: float | None = None
    high: float | None = None
    mean: float = 0.0

    def add(self, x: float) -> None:
        self.count += 1
        self.low = x if self.low is None else min(self.low, x)
        self.high = x if self.high is None else max(self.high, x)
        self.mean += x / self.count - self.mean / self.count

    def summary(self) -> dict[str, float] | None:
        if not self.count:
            return None
        return {"min": self.low, "max": self.high, "mean": self.mean}


def _as_text(value: Any) -> str:
    """Text as it is; any other value as the JSON it was read from (a list reads ["x"], not ['x'])."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class _FieldStats:
    present: int = 0
    types: dict[str, int] = field(default_factory=dict)
    example: str | None = None
    numeric: _Running = field(default_factory=_Running)
    length: _Running = field(default_factory=_Running)

    def add(self, value: Any) -> None:
        self.present += 1
        kind = json_type(value)
        self.types[kind] = self.types.get(kind, 0) + 1
        if self.example is None and value not in (None, "", [], {}):
            self.example = _as_text(value)[:EXAMPLE_CHARS]
        if kind == "number" or (kind == "integer" and value.bit_length() <= _FLOAT_MAX_BITS):
            self.numeric.add(float(value))
        elif kind in ("string", "array", "object"):
            self.length.add(float(len(value)))


class FieldStatistics:
    """Feed `add(fields)` per row; `result()` is JSON-ready: row count and, per field, presence,
    types, an example, numeric min/max/mean and length (characters or items) min/max/mean."""

    def __init__(self) -> None:
        self.rows = 0
        self._fields: dict[str, _FieldStats] = {}

    @property
    def field_count(self) -> int:
        return len(self._fields)

    def add(self, fields: dict[str, Any]) -> None:
        self.rows += 1
        for name, value in fields.items():
            self._fields.setdefault(name, _FieldStats()).add(value)

    def result(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "fields": {
                name: {
                    "present": s.present,
                    "types": dict(sorted(s.types.items())),
                    "example": s.example,
                    "numeric": s.numeric.summary(),
                    "length": s.length.summary(),
                }
                for name, s in sorted(self._fields.items())
            },
        }
