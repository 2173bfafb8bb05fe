"""The wire format between a runner and its workers: one JSON document per line, UTF-8.

Lone surrogates (they occur in model text) pass through unchanged; JSON escapes every newline inside
strings, so a line is always one whole message.
"""

from __future__ import annotations

import json
from typing import Any


def encode(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass") + b"\n"


def decode(line: bytes) -> Any:
    return json.loads(line.decode("utf-8", "surrogatepass"))
