"""The loop's echo-trap detector on a real run that learns, then falls apart.

The short demo's SFT policy is trained by GRPO with no KL, sampling at temperature 0.5, while the learning
rate climbs linearly (2.5e-4 per step, a warm-up towards 1e-2 that never ends). Reward rises to ~0.95
within a few steps and the policy sharpens on that plateau (group std down to ~0.05), which must raise
no alert. Once the rate leaves the stable range (above ~4e-3 for this policy) the run falls apart, and
how is chaotic: across seeds and code revisions it either collapsed at steps 20 to 29 (one repeated
word, malformed calls or near-uniform noise; sometimes after a few steps of dips, the detector then
warning 1 to 6 steps ahead, sometimes in one update from ~0.9, which no rule can see coming) or its
entropy collapsed while reward swung between 0.4 and 0.95. So this asserts what holds in every case:
silence while learning and sharpening, then an alert, by the step after the collapse if there is one.
At a constant rate the policy collapses in one or two updates (every rate from 5e-3 to 5e-2), before
the detector's warm-up is over. This reward (a well-formed calculator call) does not depend on the
prompt, so within-group std is a function of the mean reward and cannot fall ahead of it. The warning
ahead of a collapse is tested below on the full demo's policy, whose correctness reward depends on the
prompt, and on synthetic series in tests/trainers/metrics/test_echo_trap.py.
"""

import json
from pathlib import Path

import pytest

from trainers.config.loader import validate_config
from trainers.demo.recipe import DemoSettings, demo_sft, rl_config
from trainers.training.build import build_trainer
from trainers.training.model_io import load_policy

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}  # as the short demo test
FALLEN = 0.5  # reward at most this, after a plateau near 0.95, is a run falling apart
COLLAPSED = 0.05  # and at most this, a run that scores (almost) nothing


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def collapsing_config(tmp_path: Path, policy: dict, steps: int, seed: int):
    settings = DemoSettings(seed=seed, rl_steps=steps, rl_lr=1e-2, kl_coef=0.0, eval_every=0)
    raw = rl_config(settings, tmp_path, policy["base"], policy["data"], reward=ARTIST).model_dump()
    raw["sampling"]["temperature"] = 0.5
    raw["optimizer"]["warmup_steps"] = 40  # the rate at step k is k * 2.5e-4
    return validate_config(raw)


@pytest.mark.slow
def test_silent_while_learning_and_alerted_by_the_fall(tmp_path, demo_sft_policy):
    model, tokenizer = load_policy(demo_sft_policy["sft"])
    config = collapsing_config(tmp_path, demo_sft_policy, steps=30, seed=0)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    run = Path(config.output_dir)
    metrics = read(run / "metrics.jsonl")
    rewards = {row["step"]: row["reward/mean"] for row in metrics}
    stds = {row["step"]: row["reward/group_std_mean"] for row in metrics}
    # it learned first, then fell apart: some later step scores at most FALLEN
    learned = min(step for step, reward in rewards.items() if reward >= 0.8)
    fallen = min((s for s in rewards if s > learned and rewards[s] <= FALLEN), default=None)
    assert fallen is not None, rewards
    # the plateau sharpened: group std fell below the std rule's threshold, yet no alert came then
    sharpest = min((s for s in stds if learned <= s < fallen), key=stds.get)
    assert stds[sharpest] < config.echo_trap.detector.std_collapse_ratio * max(stds.values())
    alerts = [row["alert"] for row in read(run / "alerts.jsonl")]
    assert alerts, rewards
    first = alerts[0]
    assert max(learned, sharpest) < first["step"], (first, rewards)
    # a run that collapses for good (every sample scoring 0) is flagged by the step after at the latest
    collapsed = min((s for s in rewards if s > learned and rewards[s] <= COLLAPSED), default=None)
    assert collapsed is None or first["step"] <= collapsed + 1, (first, rewards)
    assert first["rule"] in ("std_collapse", "entropy_drop")
    evidence, tolerance = first["evidence"], config.echo_trap.detector.reward_tolerance
    assert evidence["reward_mean"] <= evidence["reward_at_reference"] + tolerance


@pytest.fixture(scope="module")
def full_demo_sft(tmp_path_factory) -> dict:
    """The full CPU demo's policy after its 1,100 SFT steps (about 2.5 minutes on 2 threads): unlike the
    short demo's, it copies numbers, so its correctness reward depends on the prompt."""
    import torch

    torch.set_num_threads(2)
    out = tmp_path_factory.mktemp("full_demo")
    sft = demo_sft(DemoSettings(seed=0), out)
    return {"sft": out / "sft", "data": sft.data}


@pytest.mark.slow
@pytest.mark.parametrize("rl_seed", [0, 1])
def test_alerts_before_a_prompt_dependent_reward_has_collapsed(tmp_path, full_demo_sft, rl_seed):
    """RAGEN's echo trap on the full demo's policy: GRPO on correctness, no KL, the learning rate
    climbing 2.5e-4 per step. Entropy falls first, then within-group std, while reward stalls; then
    reward collapses to 0. The detector must alert while reward is still clearly above 0."""
    model, tokenizer = load_policy(full_demo_sft["sft"])
    settings = DemoSettings(seed=rl_seed, rl_steps=16, rl_lr=1e-2, kl_coef=0.0, eval_every=0)
    raw = rl_config(settings, tmp_path, full_demo_sft["sft"], full_demo_sft["data"]).model_dump()
    raw["optimizer"]["warmup_steps"] = 40  # the rate at step k is k * 2.5e-4
    config = validate_config(raw)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    run = Path(config.output_dir)
    rewards = {row["step"]: row["reward/mean"] for row in read(run / "metrics.jsonl")}
    collapsed = min(s for s in rewards if all(rewards[t] <= COLLAPSED for t in rewards if t >= s))
    assert collapsed <= max(rewards) - 2 and max(rewards.values()) >= 0.3, rewards  # learned, then collapsed
    alerts = [row["alert"] for row in read(run / "alerts.jsonl")]
    assert alerts, rewards
    first = alerts[0]
    assert first["step"] < collapsed, (first, rewards)
    assert first["rule"] in ("std_collapse", "entropy_drop")
    assert rewards[first["step"]] > COLLAPSED and first["evidence"]["reward_mean"] > 2 * COLLAPSED
