"""Limits on JSON a model wrote: nesting depth, checked without recursion.

Model output is parsed into tool-call arguments that later pass through recursive code (schema
validation, `dataclasses.asdict`, `json.dumps`, the database's jsonb): a call nested a few hundred
levels deep parses, then raises RecursionError far from the parser. Parsers refuse it up front.
"""

from __future__ import annotations

from typing import Any

MAX_JSON_DEPTH = 64  # real tool arguments nest a handful of levels


def json_depth(value: Any, *, limit: int | None = None) -> int:
    """How deeply lists and dicts nest in `value` (a scalar is 0, `[]` is 1), iteratively; stops
    counting once past `limit`, so a hostile value costs no more than the limit."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            depth += 1
            deepest = max(deepest, depth)
            if limit is not None and deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    return json_depth(value, limit=limit) > limit
