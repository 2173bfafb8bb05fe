"""The loop's echo-trap detector on a real run driven to collapse: the short demo's SFT policy trained by
GRPO at a learning rate 50x the demo's, with no KL. The tiny policy collapses within one or two updates
(reward to 0 for every sample), so this checks the collapse is flagged from the recorded metrics with
the reward evidence; the early warning (alert before reward has fully collapsed) is only testable on the
gradual synthetic collapse in tests/trainers/metrics/test_echo_trap.py."""

import json
from pathlib import Path

import pytest

from trainers.demo.recipe import DemoSettings, rl_config
from trainers.training.build import build_trainer
from trainers.training.model_io import load_policy

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}  # as the short demo test


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_run_driven_to_collapse_is_flagged(tmp_path, demo_sft_policy):
    model, tokenizer = load_policy(demo_sft_policy["sft"])
    settings = DemoSettings(rl_steps=8, rl_lr=5e-2, kl_coef=0.0, eval_every=0)
    config = rl_config(settings, tmp_path, demo_sft_policy["base"], demo_sft_policy["data"], reward=ARTIST)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    run = Path(config.output_dir)
    rewards = {row["step"]: row["reward/mean"] for row in read(run / "metrics.jsonl")}
    collapsed = min(step for step in rewards if all(rewards[s] == 0 for s in rewards if s >= step))
    assert rewards[1] > 0 and collapsed <= 4  # a real collapse: every sample scores 0 from here on
    alerts = [row["alert"] for row in read(run / "alerts.jsonl")]
    collapse = next(a for a in alerts if a["rule"] == "std_collapse")
    # the first step the default detector may judge (warmup_steps=5) or the next
    assert collapse["step"] <= max(collapsed, 5) + 1
    assert collapse["evidence"]["reward_mean"] <= collapse["evidence"]["reward_at_reference"]
