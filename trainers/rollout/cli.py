"""`python -m trainers rollout CONFIG`: roll out a local model over a dataset, write trajectories as JSONL."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from trainers.rollout.config import RolloutRunConfig, load_rollout_config, read_rows


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rollout", help="sample trajectories of a local model with tools")
    parser.add_argument("config", type=Path, help="YAML or JSON rollout config")
    parser.add_argument("--output", type=Path, default=None, help="override the config's output path")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_rollout_config(args.config)
    if args.output is not None:
        config.output = str(args.output)
    summary = rollout_to_file(config)
    print(json.dumps(summary, indent=2))
    return 0


def rollout_to_file(config: RolloutRunConfig) -> dict:
    """Run the rollout and write one trajectory per line; return a short summary."""
    from trainers.backends.hf import HFBackend
    from trainers.rollout.engine import RolloutEngine

    backend = HFBackend(
        model_path(config.model.path, Path(config.output).parent),
        None if config.model.tokenizer_path is None else _tokenizer(config.model.tokenizer_path),
        device=None if config.model.device == "auto" else config.model.device,
        dtype=config.model.dtype,
        max_batch_size=config.max_batch_size,
    )
    bindings = [binding.model_dump() for binding in config.tools]
    engine = RolloutEngine(
        backend,
        config.template.name,
        bindings,
        config.limits,
        config.sampling,
        prompt_source=config.template.source,
    )
    rows = read_rows(config)
    start = time.perf_counter()
    trajectories = engine.run(rows, config.samples_per_prompt, seed=config.seed)
    seconds = time.perf_counter() - start
    out = Path(config.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for traj in trajectories:
            handle.write(traj.to_json() + "\n")
    tokens = sum(t.num_policy_tokens for t in trajectories)
    return {
        "output": str(out),
        "trajectories": len(trajectories),
        "seconds": round(seconds, 3),
        "policy_tokens": tokens,
        "tool_calls": sum(t.num_tool_calls for t in trajectories),
        "failed_calls": sum(t.num_failed_calls for t in trajectories),
        "finish_reasons": dict(Counter(t.finish_reason for t in trajectories)),
    }


def model_path(path: str, out_dir: Path) -> str:
    """A local model directory; "tiny" builds the bundled demo model next to the output, once."""
    if path != "tiny":
        return path
    from trainers.models.tiny import build_tiny_model

    target = out_dir / "base_model"
    return str(target if (target / "config.json").exists() else build_tiny_model(target))


def _tokenizer(path: str):
    from trainers.models.loading import load_tokenizer

    return load_tokenizer(path)
