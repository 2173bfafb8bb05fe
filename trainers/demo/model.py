"""The demo's tiny policy: a tokenizer trained on the rendered expert conversations, and a fresh model.

The tokenizer merges across spaces (`split_words=False`), so the long Qwen tool system prompt is a
few dozen tokens instead of hundreds: that is what makes SFT plus RL fit in minutes on two cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trainers.models.tiny import build_tiny_model
from trainers.templates.base import ChatTemplate
from trainers.training.tiny_policy import conversation_corpus


def build_demo_model(
    out_dir: str | Path,
    records: Sequence[dict],
    *,
    template: ChatTemplate,
    tools: list[dict],
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    isolated: str = "",
) -> Path:
    """Build and save the tokenizer and an untrained Qwen2 policy (about 0.7M parameters)."""
    corpus = conversation_corpus(records, template=template, tools=tools)
    return build_tiny_model(
        out_dir,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        seed=seed,
        corpus=corpus,
        split_words=False,
        isolated=isolated,
    )
