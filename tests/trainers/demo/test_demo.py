"""The demo in miniature (under two minutes): after a short SFT, GRPO with tool-integrated rollouts raises
the calculator-call rate far beyond sampling noise. The full demo (`python -m trainers demo`) uses a
plain correctness reward; this short version adds ARTIST's tool-execution term, since a policy this
briefly trained cannot copy numbers yet and so cannot earn correctness from the tool.
"""

import json
from pathlib import Path

import pytest
import torch

from trainers.demo.recipe import DemoSettings, held_out_eval, rl_config
from trainers.models.model_io import load_policy
from trainers.training.build import build_trainer

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}


@pytest.mark.slow
def test_grpo_raises_the_tool_call_rate(tmp_path, demo_sft_policy):
    torch.set_num_threads(1)
    model, tokenizer = load_policy(demo_sft_policy["sft"])
    held_out, base, data = demo_sft_policy["held_out"], demo_sft_policy["base"], demo_sft_policy["data"]
    settings = DemoSettings(rl_steps=20, rl_lr=1e-3, kl_coef=0.0, eval_every=0, eval_samples=2)
    rows = [p.row() for p in held_out]
    before = held_out_eval(model, tokenizer, rows, settings)["sampled/tool_call_rate"]
    config = rl_config(settings, tmp_path, base, data, reward=ARTIST)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    after = held_out_eval(model, tokenizer, rows, settings)["sampled/tool_call_rate"]
    # 128 samples each: the binomial std of a rate near 0.5 is about 0.045, of the difference about 0.065
    assert 0.15 < before < 0.85
    assert after - before > 0.25
    # a healthy run: the loop's echo-trap detector (on by default) judged 15 steps past its warm-up and
    # recorded no alert, though entropy fell below half its peak (the entropy rule's threshold): reward rose
    run, detector = Path(config.output_dir), config.echo_trap.detector
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert config.echo_trap.enabled and len(metrics) - detector.warmup_steps >= 15
    entropy, reward = [row["loss/entropy"] for row in metrics], [row["reward/mean"] for row in metrics]
    assert sum(reward[-5:]) > sum(reward[:5])
    assert min(entropy) < detector.entropy_drop_ratio * max(entropy)
    alerts = run / "alerts.jsonl"
    assert not alerts.exists() or [json.loads(line) for line in alerts.read_text().splitlines()] == []
