"""Session-wide fixtures for trainers tests: the tiny model, and the short demo's SFT policy, each built
once into a temporary directory."""

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


@pytest.fixture(scope="session")
def demo_sft_policy(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The short demo's calculator policy after 100 SFT steps on a 50/50 tool mix (about 5 s), saved:
    {"base", "sft": model dirs, "data": {"train", "val"} paths, "held_out": problems}."""
    import torch

    from trainers.demo.arithmetic import make_splits, write_rows
    from trainers.demo.experts import make_experts
    from trainers.demo.model import build_demo_model
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.tools.toolset import Toolset
    from trainers.training.sft import render_experts, sft_train

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("demo_sft")
    train, held_out = make_splits(400, 64, seed=5)
    data = {"train": write_rows(train, out / "train.jsonl"), "val": write_rows(held_out, out / "val.jsonl")}
    records = make_experts(train, tool_fraction=0.5, seed=0)
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    base = build_demo_model(out / "base", records, template=template, tools=tools, hidden_size=64,
                            num_layers=2, num_heads=2, num_kv_heads=1)  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=100, batch_size=16, lr=3e-3)
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return {"base": base, "sft": out / "sft", "data": data, "held_out": held_out}
