"""The loop's echo-trap detector on a real run that learns, then collapses.

The short demo's SFT policy is trained by GRPO with no KL, sampling at temperature 0.5, while the learning
rate climbs linearly (2.5e-4 per step, a warm-up towards 1e-2 that never ends): reward rises to ~0.95
within a few steps and the policy sharpens on that plateau (entropy and group std fall), which must raise
no alert; once the rate leaves the stable range (above ~4e-3 for this policy) reward turns unstable and
collapses to 0 for every sample. This tiny policy collapses in one or two updates wherever we put it
(constant rates 5e-3 to 5e-2, wide-clip PPO epochs, low temperature, self-reinforcement), so the step
before a collapse looks healthy: the best any detector can do is to alert on the collapse step; warning
earlier on a gradual collapse is tested on synthetic series in tests/trainers/metrics/test_echo_trap.py.
"""

import json
from pathlib import Path

import pytest

from trainers.config.loader import validate_config
from trainers.demo.recipe import DemoSettings, rl_config
from trainers.training.build import build_trainer
from trainers.training.model_io import load_policy

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}  # as the short demo test
COLLAPSED = 0.05  # a step whose mean reward is at most this scores (almost) nothing


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def collapsing_config(tmp_path: Path, policy: dict, steps: int):
    settings = DemoSettings(rl_steps=steps, rl_lr=1e-2, kl_coef=0.0, eval_every=0)
    raw = rl_config(settings, tmp_path, policy["base"], policy["data"], reward=ARTIST).model_dump()
    raw["sampling"]["temperature"] = 0.5
    raw["optimizer"]["warmup_steps"] = 40  # the rate at step k is k * 2.5e-4
    return validate_config(raw)


@pytest.mark.slow
def test_sharpening_is_silent_and_the_collapse_is_flagged_on_its_step(tmp_path, demo_sft_policy):
    model, tokenizer = load_policy(demo_sft_policy["sft"])
    config = collapsing_config(tmp_path, demo_sft_policy, steps=30)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    run = Path(config.output_dir)
    rewards = {row["step"]: row["reward/mean"] for row in read(run / "metrics.jsonl")}
    # it learned first, then collapsed for good: every step from `collapsed` on scores (almost) nothing
    learned = min(step for step, reward in rewards.items() if reward >= 0.8)
    collapsed = min(s for s in rewards if all(rewards[t] <= COLLAPSED for t in rewards if t >= s))
    assert learned < collapsed <= max(rewards) - 2, rewards
    alerts = [row["alert"] for row in read(run / "alerts.jsonl")]
    assert alerts, rewards
    first = alerts[0]
    # silent while reward rises and on its plateau; flagged no later than the step the reward is gone
    assert learned < first["step"] <= collapsed, (first, rewards)
    reward = first["evidence"]
    assert reward["reward_mean"] <= reward["reward_at_reference"] + config.echo_trap.detector.reward_tolerance
    trap = next(a for a in alerts if a["rule"] == "echo_trap")
    assert trap["severity"] == "critical" and trap["step"] <= collapsed + 2
