"""Session-wide fixtures for trainers tests: the tiny model and the short demo's SFT policy, each built once
per settings and trainers code and kept in pytest's cache directory (tests/support/trained_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.trained_cache import trained
from trainers.models.tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny Qwen2 policy and tokenizer, loadable with `from_pretrained` (seeded: built once per
    trainers code, tests/support/trained_cache.py)."""
    return trained(request, tmp_path_factory, "tiny_model", {}, lambda out, _: build_tiny_model(out))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


DEMO_SFT = {
    "splits": {"n_train": 400, "n_eval": 64, "seed": 5},
    "experts": {"tool_fraction": 0.5, "seed": 0},
    "model": {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1},
    "sft": {"steps": 100, "batch_size": 16, "lr": 3e-3},
}


def build_demo_sft(out: Path, settings: dict) -> None:
    """The short demo's calculator policy (on the one torch thread the fixture set): base/, sft/ and the
    train/val rows."""
    from trainers.demo.arithmetic import make_splits, write_rows
    from trainers.demo.experts import make_experts
    from trainers.demo.model import build_demo_model
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.tools.toolset import Toolset
    from trainers.training.sft import render_experts, sft_train

    train, held_out = make_splits(**settings["splits"])
    write_rows(train, out / "train.jsonl")
    write_rows(held_out, out / "val.jsonl")
    records = make_experts(train, **settings["experts"])
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    base = build_demo_model(out / "base", records, template=template, tools=tools, **settings["model"])
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, **settings["sft"])
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")


@pytest.fixture(scope="session")
def demo_sft_policy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The short demo's calculator policy after 100 SFT steps on a 50/50 tool mix, built once per settings
    and trainers code (tests/support/trained_cache.py): {"base", "sft": model dirs, "data": {"train",
    "val"} paths, "held_out": problems}."""
    import torch

    from trainers.demo.arithmetic import make_splits

    torch.set_num_threads(1)  # for the build, and for the tests that train on from it, as they always did
    out = trained(request, tmp_path_factory, "demo_sft", DEMO_SFT, build_demo_sft)
    _, held_out = make_splits(**DEMO_SFT["splits"])
    data = {"train": out / "train.jsonl", "val": out / "val.jsonl"}
    return {"base": out / "base", "sft": out / "sft", "data": data, "held_out": held_out}
