"""Per-token shading for the inspector: each sampled token's text with its sampling probability and
the entropy of the distribution it was sampled from, and the shade level the page draws it with.

Only the run's own tokenizer file is read (`tokenizer.json` of the model or tokenizer path, or of the
bundled tiny model the worker built in the run directory); without it the page shows whole turns.
Shades are CSS classes (`shade-0` .. `shade-10`), not inline styles, so the page needs no style-src.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..execution.worker import run_dir
from ..models import Run

SHADINGS = ("logprob", "entropy")
SHADES = 10  # the darkest level
ENTROPY_FULL_NATS = 4.0  # an entropy of this many nats or more gets the darkest shade


@dataclass(frozen=True)
class TokenPiece:
    text: str
    logprob: float
    prob: float
    entropy: float | None
    shade: int  # 0 (none) .. SHADES: how unlikely the token was, or how uncertain its distribution


def shade_level(*, prob: float, entropy: float | None, by: str) -> int:
    """The shade of one token: by "logprob", 1 - p; by "entropy", H / ENTROPY_FULL_NATS (capped at 1)."""
    if by == "entropy":
        fraction = 0.0 if entropy is None else min(max(entropy, 0.0) / ENTROPY_FULL_NATS, 1.0)
    else:
        fraction = 1.0 - prob
    return round(fraction * SHADES)


def has_entropies(turns: list[dict]) -> bool:
    """Whether the trajectory kept per-token entropies (runs sampled before they were stored did not)."""
    return any(turn.get("entropies") for turn in turns if turn.get("role") == "assistant")


def _tokenizer_file(run: Run) -> Path | None:
    model = run.typed_config.model
    folders = [model.tokenizer_path, model.path]
    if model.path == "tiny":
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


def turn_pieces(run: Run, turns: list[dict], by: str = "logprob") -> dict[int, list[TokenPiece]] | None:
    """Turn index -> its tokens with probabilities and entropies, shaded `by` one of SHADINGS, for
    assistant turns that kept their logprobs; None when the run's tokenizer is not readable here."""
    path = _tokenizer_file(run)
    if path is None:
        return None
    tokenizer = _load(str(path))
    pieces = {}
    for index, turn in enumerate(turns):
        logprobs = turn.get("logprobs")
        if turn.get("role") != "assistant" or not logprobs:
            continue
        entropies = turn.get("entropies") or [None] * len(logprobs)
        pieces[index] = [
            _piece(tokenizer.decode([token], skip_special_tokens=False), lp, entropy, by)
            for token, lp, entropy in zip(turn["token_ids"], logprobs, entropies, strict=False)
            if lp is not None
        ]
    return pieces


def _piece(text: str, logprob: float, entropy: float | None, by: str) -> TokenPiece:
    prob = math.exp(logprob)
    return TokenPiece(text, logprob, prob, entropy, shade_level(prob=prob, entropy=entropy, by=by))
