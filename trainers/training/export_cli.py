"""`python -m trainers export CHECKPOINT OUT [--merge]`: a checkpoint as a Hugging Face model directory."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="a training checkpoint as a Hugging Face directory (LoRA: adapter, or merged)"
    )
    parser.add_argument("checkpoint", type=Path, help="a run's checkpoint (checkpoints/step_NNNNNN)")
    parser.add_argument("out", type=Path, help="the directory to write (new or empty)")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="LoRA checkpoints: fold the adapter into the base model's weights",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainers.training.export import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.out, merge=args.merge)
    print(out)
    return 0
