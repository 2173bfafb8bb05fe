"""The smallest run config with an SFT stage, on the calculator demo's data: a 1-layer tiny model whose
tokenizer is fitted to the SFT conversations, 8 training rows and the given expert conversations."""

from __future__ import annotations

import json
from pathlib import Path

from trainers.demo.arithmetic import make_splits, write_rows

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "tokenizer_corpus": "sft_data"}


def write_records(records: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def tiny_sft_config(tmp_path: Path, records: list[dict], *, sft: dict, steps: int = 1, **overrides) -> dict:
    """A config dict (not yet validated) whose `sft` section is `sft` plus the experts' data path."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    train, _ = make_splits(8, 0, seed=1)
    return {
        "output_dir": str(tmp_path / "run"),
        "model": {"path": "tiny", "tiny": TINY},
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "limits": {"max_new_tokens_per_turn": 8, "max_turns": 2},
        "training": {"steps": steps},
        "sft": {"data_path": str(write_records(records, tmp_path / "experts.jsonl")), **sft},
        "data": {"train_path": str(write_rows(train, tmp_path / "train.jsonl"))},
        **overrides,
    }
