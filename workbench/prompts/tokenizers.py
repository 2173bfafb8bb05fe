"""Tokenizers for prompt previews: the bundled tiny tokenizer (built once per process) or a local path."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

TINY = "tiny"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class TokenizerError(ValueError):
    """The chosen tokenizer cannot be loaded; the message says why."""


@lru_cache(maxsize=1)
def _tiny() -> Any:
    from trainers.workbench_api import build_tiny_tokenizer  # training the BPE takes seconds

    return build_tiny_tokenizer()


@lru_cache(maxsize=4)
def _local(path: str) -> Any:
    from trainers.workbench_api import load_tokenizer as load_local

    try:
        return load_local(path)
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot load a tokenizer from {path}: {exc}") from exc


def load_tokenizer(choice: str) -> Any:
    """`tiny` or an absolute path to a local tokenizer directory; never a hub name (no hub here)."""
    if not choice or choice == TINY:
        return _tiny()
    path = Path(choice)
    if not path.is_absolute() or not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise TokenizerError(f"{choice} is not an absolute path to a directory with tokenizer.json")
    return _local(str(path))


def count_tokens(text: str, choice: str) -> int:
    """Number of tokens of `text` (special tokens in the text count as one each, none added)."""
    return len(load_tokenizer(choice)(text, add_special_tokens=False)["input_ids"])
