"""`python -m trainers prepare NAME IN OUT` (e.g. Tool-N1's split); `limr CONFIG --out OUT` (LIMR filter)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    prepare = subparsers.add_parser(
        "prepare", help="prepare a JSONL dataset (e.g. tool_n1: filter and split)"
    )
    prepare.add_argument("name", help="the preparer, e.g. tool_n1")
    prepare.add_argument("input", type=Path, help="JSONL rows to read")
    prepare.add_argument("output", type=Path, help="JSONL rows to write")
    prepare.set_defaults(func=run_prepare)

    limr = subparsers.add_parser(
        "limr",
        help="LIMR filter: keep the rows whose reward curve follows the model's on a probe run",
    )
    limr.add_argument("config", type=Path, help="RunConfig whose data.train_path is filtered")
    limr.add_argument("--out", type=Path, required=True, help="JSONL of the kept rows")
    limr.add_argument("--threshold", type=float, default=0.6, help="keep rows scoring at least this")
    limr.add_argument("--probe-steps", type=int, default=None, help="probe length; default: --epochs passes")
    limr.add_argument(
        "--epochs", type=int, default=3, help="passes over the rows when --probe-steps is unset"
    )
    limr.add_argument("--probe-dir", type=Path, default=None, help="default: <output_dir>-limr-probe")
    limr.add_argument(
        "--reward-range", type=float, nargs=2, default=(0.0, 1.0), metavar=("LOW", "HIGH"),
        help="rewards are scaled from this range onto [0, 1] and clipped (default 0 1: ToRL's -1 counts 0)",
    )  # fmt: skip
    limr.add_argument("--component", default=None, help="score one reward component, not the total")
    limr.add_argument("--scores", type=Path, default=None, help="JSON of every row's score and curve")
    limr.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    limr.set_defaults(func=run_limr)


def run_prepare(args: argparse.Namespace) -> int:
    from trainers.data_prep import PREPARERS

    preparer = PREPARERS.get(args.name)
    lines = args.input.read_text(encoding="utf-8").splitlines()
    result = preparer([json.loads(line) for line in lines if line.strip()])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as handle:
        for row in result.rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(json.dumps({"preparer": args.name, **result.summary(), "output": str(args.output)}))
    return 0


def run_limr(args: argparse.Namespace) -> int:
    from trainers.config.loader import load_config
    from trainers.data_prep.limr import limr_filter

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    config = load_config(args.config)
    try:
        result = limr_filter(
            config, args.out, threshold=args.threshold, steps=args.probe_steps, epochs=args.epochs,
            probe_dir=args.probe_dir, reward_range=tuple(args.reward_range), component=args.component,
            scores_path=args.scores,
        )  # fmt: skip
    except ValueError as exc:
        raise SystemExit(f"limr: {exc}") from None
    print(json.dumps({**result.summary(), "out": str(args.out)}))
    return 0
