"""`python -m trainers sandbox FILE`: run a file in the sandbox with the default limits, print JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainers.sandbox.limits import SandboxLimits
from trainers.sandbox.pool import SandboxError, WorkerPool


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sandbox", help="run a Python file in the sandbox and print the result as JSON"
    )
    parser.add_argument("file", type=Path, help="the Python file to run")
    parser.add_argument("--wall-s", type=float, default=None, help="override the wall-clock limit")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit status 0 whatever the snippet did; the JSON says what happened. 2 when the sandbox refuses
    to start (isolation unavailable: the message says what is missing)."""
    limits = SandboxLimits() if args.wall_s is None else SandboxLimits(wall_s=args.wall_s)
    try:
        pool = WorkerPool(limits, size=1)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = pool.run(args.file.read_text(encoding="utf-8", errors="replace"))
    finally:
        pool.close()
    print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    return 0
