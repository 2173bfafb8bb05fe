"""Per-token shading for the inspector: each sampled token's text with its sampling probability.

Only the run's own tokenizer file is read (`tokenizer.json` of the model or tokenizer path, or of the
bundled tiny model the worker built in the run directory); without it the page shows whole turns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .execution import run_dir
from .models import Run


@dataclass(frozen=True)
class TokenPiece:
    text: str
    logprob: float
    prob: float


def _tokenizer_file(run: Run) -> Path | None:
    model = run.config.get("model", {})
    folders = [model.get("tokenizer_path"), model.get("path")]
    if model.get("path") == "tiny":
        folders.append(str(run_dir(run) / "base_model"))
    for folder in filter(None, folders):
        path = Path(folder) / "tokenizer.json"
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=8)
def _load(path: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def turn_pieces(run: Run, turns: list[dict]) -> dict[int, list[TokenPiece]] | None:
    """Turn index -> its tokens with probabilities, for assistant turns that kept their logprobs."""
    path = _tokenizer_file(run)
    if path is None:
        return None
    tokenizer = _load(str(path))
    pieces = {}
    for index, turn in enumerate(turns):
        logprobs = turn.get("logprobs")
        if turn.get("role") != "assistant" or not logprobs:
            continue
        pieces[index] = [
            TokenPiece(tokenizer.decode([token], skip_special_tokens=False), lp, math.exp(lp))
            for token, lp in zip(turn["token_ids"], logprobs, strict=False)
            if lp is not None
        ]
    return pieces
