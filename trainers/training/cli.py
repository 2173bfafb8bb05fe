"""`python -m trainers train CONFIG` (SFT first if configured, then RL); `sft CONFIG` runs SFT alone."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser("train", help="train a policy with RL (after SFT if the config has it)")
    train.add_argument("config", type=Path, help="RunConfig file (YAML or JSON)")
    train.add_argument("--output-dir", default=None, help="override the config's output_dir")
    train.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    train.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    train.set_defaults(func=run_train)
    sft = subparsers.add_parser("sft", help="run only the config's SFT stage and save the model")
    sft.add_argument("config", type=Path, help="RunConfig file with an sft section")
    sft.add_argument("--output-dir", default=None, help="override the config's output_dir")
    sft.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    sft.set_defaults(func=run_sft)


def _config(args: argparse.Namespace):
    import torch

    from trainers.config.loader import load_config

    if args.threads:
        torch.set_num_threads(args.threads)
    config = load_config(args.config)
    if args.output_dir is not None:
        config = config.model_copy(update={"output_dir": args.output_dir})
    return config


def run_sft(args: argparse.Namespace) -> int:
    from trainers.training.run import run_sft_only

    config = _config(args)
    if config.sft is None:
        raise SystemExit("the config has no sft section")
    result, saved = run_sft_only(config)
    summary = {"sft_steps": result.steps, "seconds": round(result.seconds, 1), "loss": result.final_loss}
    print(json.dumps({**summary, "model": str(saved)}))
    return 0


def _train_argv(args: argparse.Namespace) -> list[str]:
    argv = ["train", str(Path(args.config).resolve())]
    if args.output_dir is not None:
        argv += ["--output-dir", str(args.output_dir)]
    if args.resume:
        argv.append("--resume")
    if args.threads:
        argv += ["--threads", str(args.threads)]
    return argv


def run_train(args: argparse.Namespace) -> int:
    from trainers.training import run
    from trainers.training.checkpoint import latest_checkpoint
    from trainers.training.engines.launch import distributed_rank, launch

    config = _config(args)
    if config.training.engine == "deepspeed" and distributed_rank() is None:
        return launch(config.training.deepspeed.ranks, _train_argv(args))  # this command, on N ranks
    checkpoint = latest_checkpoint(config.output_dir) if args.resume else None
    stop = {"requested": False}
    # Ctrl-C or SIGTERM ends the current step cleanly and writes a checkpoint instead of losing the run.
    previous = {
        sig: signal.signal(sig, lambda *_: stop.update(requested=True))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        result = run.run_config(config, should_stop=lambda: stop["requested"], resume_from=checkpoint)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if distributed_rank() in (None, 0):
        print(json.dumps(result.summary()))
    return 0
