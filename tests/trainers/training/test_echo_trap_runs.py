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
prompt, so within-group std is a function of the mean reward and cannot fall ahead of it. The full
demo's policy, whose correctness reward depends on the prompt, is driven to collapse below; the warning
ahead of a collapse is asserted on stored and synthetic series in tests/trainers/metrics/.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainers.config.loader import validate_config
from trainers.demo.recipe import DemoSettings, demo_sft, rl_config
from trainers.models.model_io import load_policy
from trainers.training.build import build_trainer

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
    evidence, detector = first["evidence"], config.echo_trap.detector
    if first["rule"] == "reward_fall":  # reward lost half its best: the plateau was left behind
        assert evidence["fall"] >= detector.reward_fall * evidence["peak"]
    else:
        assert first["rule"] in ("std_collapse", "entropy_drop")
        assert evidence["reward_mean"] <= evidence["reward_at_reference"] + detector.reward_tolerance


@pytest.fixture(scope="module")
def full_demo_sft(tmp_path_factory) -> dict:
    """The full CPU demo's policy after its 1,100 SFT steps (about 2.5 minutes on 2 threads): unlike the
    short demo's, it copies numbers, so its correctness reward depends on the prompt."""
    import torch

    torch.set_num_threads(2)
    out = tmp_path_factory.mktemp("full_demo")
    sft = demo_sft(DemoSettings(seed=0), out)
    return {"sft": out / "sft", "data": sft.data}


@dataclass
class CollapseRun:
    rewards: dict[int, float]
    alerts: list[dict]

    @property
    def collapsed(self) -> int | None:
        """The step from which every later step scores at most COLLAPSED, if the run saw two more."""
        last = max(self.rewards)
        fallen = [
            s for s in self.rewards if all(self.rewards[t] <= COLLAPSED for t in self.rewards if t >= s)
        ]
        return min(fallen) if fallen and min(fallen) <= last - 2 else None


def slow_collapse_run(tmp_path: Path, policy: dict, seed: int) -> CollapseRun:
    """GRPO on correctness, no KL, T=1, the learning rate climbing 1e-4 per step for 24 steps."""
    model, tokenizer = load_policy(policy["sft"])
    settings = DemoSettings(seed=seed, rl_steps=24, rl_lr=1e-2, kl_coef=0.0, eval_every=0)
    raw = rl_config(settings, tmp_path, policy["sft"], policy["data"]).model_dump()
    raw["optimizer"]["warmup_steps"] = 100  # the rate at step k is k * 1e-4
    config = validate_config(raw)
    build_trainer(config, model=model, tokenizer=tokenizer).train()
    run = Path(config.output_dir)
    rewards = {row["step"]: row["reward/mean"] for row in read(run / "metrics.jsonl")}
    return CollapseRun(rewards, [row["alert"] for row in read(run / "alerts.jsonl")])


@pytest.mark.slow
def test_every_collapse_of_a_prompt_dependent_reward_is_flagged_by_the_step_after(tmp_path, full_demo_sft):
    """The full demo's policy (reward around 0.1-0.4, entropy already low) trained at a climbing rate
    until it falls apart: every sample scores 0. How each run falls is chaotic and differs between CPUs
    of one kind: on one machine the three seeds declined over a few steps and were warned 3 to 7 steps
    ahead (2026-12-03), on another all three fell off a cliff in one update and were flagged the step
    after, which no rule can see coming. So this asserts what held everywhere: the recipe falls apart,
    it scored before, and every collapse is flagged by the step after at the latest. The warning ahead
    of a decline is asserted on one of these runs' stored series (tests/trainers/metrics/
    test_echo_trap_demo_runs.py) and on synthetic ones (test_echo_trap.py)."""
    runs = [slow_collapse_run(tmp_path / f"seed{seed}", full_demo_sft, seed) for seed in (0, 1, 2)]
    collapsed = [run for run in runs if run.collapsed is not None]
    assert len(collapsed) >= 2, [run.rewards for run in runs]  # the recipe falls apart
    for run in collapsed:
        # it scored before it fell: the full demo's policy starts around 0.1-0.4 and its peak varies
        # with the CPU's kernels, so 'scored' is four times the collapsed level, not a tuned value
        assert max(run.rewards.values()) >= 4 * COLLAPSED, run.rewards
        assert run.alerts and run.alerts[0]["step"] <= run.collapsed + 1, (run.alerts[:1], run.rewards)
        # no_signal: most groups all scoring alike (every sample 0) with no gain since the start
        assert run.alerts[0]["rule"] in ("std_collapse", "entropy_drop", "reward_fall", "no_signal")
