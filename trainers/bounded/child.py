"""The worker side of trainers.bounded, started as `python -m trainers.bounded.child SPEC`.

SPEC is JSON: {"memory_mb": n, "preload": [modules]}. The worker sets its limits, imports the preload
modules, answers {"ready": true} and then serves one request per line of stdin,
{"fn": "module:name", "args": [...], "cpu_s": n, "output_bytes": n}, with one line:
{"ok": result}, {"raised": exception class, "message": text} or {"exceeded": "output" | "memory"}.
It exits at the end of stdin, after a MemoryError, or when RLIMIT_CPU's SIGXCPU kills it.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import resource
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from trainers.bounded.protocol import decode, encode

MAX_MESSAGE_CHARS = 2000  # of an exception's text sent back


def _set_limit(kind: int, soft: int, *, hard_too: bool = False) -> None:
    """Lower `kind` to `soft` (never above the inherited hard limit); `hard_too` makes it final."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(kind, (soft, soft if hard_too else hard))


def _cpu_budget(seconds: int) -> None:
    """SIGXCPU once this call has used `seconds` of CPU on top of what the worker used before it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _set_limit(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + seconds))


def _protocol_streams() -> tuple[IO[bytes], IO[bytes]]:
    """Private copies of stdin/stdout for the protocol; fd 0 reads nothing, stray prints go to stderr."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return requests, replies


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def answer(request: dict[str, Any]) -> bytes:
    """The reply line to one request; MemoryError propagates (the worker's state is then suspect)."""
    _cpu_budget(int(request["cpu_s"]))
    try:
        line = encode({"ok": _resolve(request["fn"])(*request["args"])})
    except MemoryError:
        raise
    except Exception as exc:  # the function's own failure, reported to the caller
        return encode({"raised": type(exc).__name__, "message": str(exc)[:MAX_MESSAGE_CHARS]})
    if len(line) > request["output_bytes"]:
        return encode({"exceeded": "output", "bytes": len(line)})
    return line


def serve(requests: Iterator[bytes], replies: IO[bytes]) -> None:
    for line in requests:
        try:
            reply = answer(decode(line))
        except MemoryError:
            replies.write(encode({"exceeded": "memory"}))
            replies.flush()
            return
        replies.write(reply)
        replies.flush()


def main(spec_text: str) -> None:
    spec = json.loads(spec_text)
    sys.dont_write_bytecode = True
    requests, replies = _protocol_streams()
    memory = int(spec["memory_mb"]) * 1024 * 1024
    _set_limit(resource.RLIMIT_AS, memory, hard_too=True)
    _set_limit(resource.RLIMIT_CORE, 0, hard_too=True)
    for module in spec["preload"]:
        importlib.import_module(module)
    replies.write(encode({"ready": True}))
    replies.flush()
    serve(requests, replies)


if __name__ == "__main__":
    main(sys.argv[1])
