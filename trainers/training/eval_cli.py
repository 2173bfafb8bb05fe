"""`python -m trainers eval CONFIG`: evaluate a model on a dataset file, print the metrics as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="evaluate a model: accuracy, pass@k, tool use, as JSON")
    parser.add_argument("config", type=Path, help="evaluation config (YAML or JSON), see EvalConfig")
    parser.add_argument("--trajectories", type=Path, default=None, help="also write trajectories (JSONL)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainers.training.eval_run import evaluate_config, finite, load_eval_config

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    config = load_eval_config(args.config)
    if args.trajectories is not None:
        config = config.model_copy(update={"trajectories": str(args.trajectories)})
    metrics, _ = evaluate_config(config)
    print(json.dumps(finite(metrics), indent=2, sort_keys=True))
    return 0
