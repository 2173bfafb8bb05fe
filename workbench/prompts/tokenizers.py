"""Tokenizers for prompt previews: the bundled tiny tokenizer (built once per process) or a local
tokenizer directory under one of the model roots (WORKBENCH_MODEL_ROOTS); no other server path is read."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

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


def model_roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.WORKBENCH_MODEL_ROOTS if root]


def _under_model_roots(path: Path) -> bool:
    real = path.resolve()  # symlinks followed: a link under a root may not lead out of it
    return any(real.is_relative_to(root) for root in model_roots())


def load_tokenizer(choice: str) -> Any:
    """`tiny` or an absolute path to a tokenizer directory under a model root; never a hub name."""
    if not choice or choice == TINY:
        return _tiny()
    path = Path(choice)
    if not path.is_absolute():
        raise TokenizerError(f"{choice} is not an absolute path to a directory with tokenizer.json")
    if not _under_model_roots(path):
        roots = ", ".join(map(str, model_roots())) or "none configured"
        raise TokenizerError(f"{choice} is not under a model root (WORKBENCH_MODEL_ROOTS: {roots})")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise TokenizerError(f"{choice} is not an absolute path to a directory with tokenizer.json")
    return _local(str(path.resolve()))


def count_tokens(text: str, choice: str) -> int:
    """Number of tokens of `text` (special tokens in the text count as one each, none added)."""
    return len(load_tokenizer(choice)(text, add_special_tokens=False)["input_ids"])
