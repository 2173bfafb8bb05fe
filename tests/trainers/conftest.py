"""Session-wide fixtures for trainers tests: the tiny model, built once into a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers.models.tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny Qwen2 policy and tokenizer, loadable with `from_pretrained`."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))
