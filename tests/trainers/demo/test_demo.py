"""The demo in miniature (under two minutes): after a short SFT, GRPO with tool-integrated rollouts raises
the calculator-call rate far beyond sampling noise. The full demo (`python -m trainers demo`) uses a
plain correctness reward; this short version adds ARTIST's tool-execution term, since a policy this
briefly trained cannot copy numbers yet and so cannot earn correctness from the tool.
"""

import json
from pathlib import Path

import pytest
import torch

from trainers.demo.arithmetic import make_splits, write_rows
from trainers.demo.experts import make_experts
from trainers.demo.model import build_demo_model
from trainers.demo.recipe import DemoSettings, held_out_eval, rl_config
from trainers.templates import TEMPLATES
from trainers.tools.toolset import Toolset
from trainers.training.build import build_trainer
from trainers.training.model_io import load_policy
from trainers.training.sft import render_experts, sft_train

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}


@pytest.mark.slow
def test_grpo_raises_the_tool_call_rate(tmp_path):
    torch.set_num_threads(1)
    train, held_out = make_splits(400, 64, seed=5)
    data = {
        "train": write_rows(train, tmp_path / "train.jsonl"),
        "val": write_rows(held_out, tmp_path / "val.jsonl"),
    }
    records = make_experts(train, tool_fraction=0.5, seed=0)
    template, tools = TEMPLATES.get("qwen_tool")(), Toolset.build(["calculator"]).specs()
    base = build_demo_model(tmp_path / "base", records, template=template, tools=tools, hidden_size=64,
                            num_layers=2, num_heads=2, num_kv_heads=1)  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts(records, template=template, tokenizer=tokenizer, tools=tools)
    sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=100, batch_size=16, lr=3e-3)
    settings = DemoSettings(rl_steps=6, rl_lr=1e-3, kl_coef=0.0, eval_every=0, eval_samples=2)
    rows = [p.row() for p in held_out]
    before = held_out_eval(model, tokenizer, rows, settings)["sampled/tool_call_rate"]
    config = rl_config(settings, tmp_path, base, data, reward=ARTIST)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    after = held_out_eval(model, tokenizer, rows, settings)["sampled/tool_call_rate"]
    # 128 samples each: the binomial std of a rate near 0.5 is about 0.045, of the difference about 0.065
    assert 0.15 < before < 0.85
    assert after - before > 0.25
    # a healthy run: the loop's echo-trap detector (on by default) recorded no alert
    alerts = Path(config.output_dir) / "alerts.jsonl"
    assert config.echo_trap.enabled and (Path(config.output_dir) / "metrics.jsonl").exists()
    assert not alerts.exists() or [json.loads(line) for line in alerts.read_text().splitlines()] == []
