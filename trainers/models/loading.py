"""Loading a local tokenizer exactly as it was trained (never from a hub name).

transformers 5 rebuilds the pre-tokenizer of some model types (Qwen2 among them) from its own
defaults when `AutoTokenizer` loads them; `tokenizer.json` is the tokenizer that was trained, so
we load that file as it is whenever a directory has one. Every loader in the project goes through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_tokenizer(path: str | Path, *, local_files_only: bool = True) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(path)
    if (path / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=local_files_only)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=local_files_only)
