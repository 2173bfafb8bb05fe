"""Loading a local policy and its tokenizer for training (never from a hub name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainers.models.loading import load_tokenizer


def load_policy(
    path: str | Path, *, tokenizer_path: str | Path | None = None, dtype: torch.dtype = torch.float32
) -> tuple[Any, Any]:
    """(model, tokenizer) from a local `from_pretrained` directory, model in train mode; the tokenizer
    comes from `tokenizer_path` when given, else from the model's directory."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model path {path} does not exist (only local paths are supported)")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
    tokenizer = load_tokenizer(path if tokenizer_path is None else tokenizer_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # padding is masked out; any id will do
    return model, tokenizer
