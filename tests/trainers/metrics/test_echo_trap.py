"""Echo-trap detector on synthetic metric series (deterministic noise)."""

import math
import random

import pytest
from pydantic import ValidationError

from trainers.metrics import EchoTrapConfig, EchoTrapDetector, keys

STEPS = 100


def healthy(seed=0):
    """Reward rises slowly, group std stays ~0.4, entropy declines gently, grad norm ~1 (lognormal)."""
    rng = random.Random(seed)
    series = {
        keys.REWARD_MEAN: [],
        keys.REWARD_GROUP_STD_MEAN: [],
        keys.LOSS_ENTROPY: [],
        keys.LOSS_GRAD_NORM: [],
    }
    for s in range(STEPS):
        series[keys.REWARD_MEAN].append((s, 0.2 + 0.4 * s / STEPS + rng.gauss(0, 0.03)))
        series[keys.REWARD_GROUP_STD_MEAN].append((s, max(0.0, 0.4 + rng.gauss(0, 0.06))))
        series[keys.LOSS_ENTROPY].append((s, 1.5 - 0.5 * s / STEPS + rng.gauss(0, 0.05)))
        series[keys.LOSS_GRAD_NORM].append((s, math.exp(rng.gauss(0, 0.3))))
    return series


def sharpening(seed=0):
    """From step 40 the group std decays, entropy falls, grad norm spikes at 50; reward climbs to 0.95."""
    series = healthy(seed)
    rng = random.Random(seed + 1)
    for i, (s, _) in enumerate(series[keys.REWARD_GROUP_STD_MEAN]):
        if s >= 40:
            series[keys.REWARD_GROUP_STD_MEAN][i] = (
                s,
                0.4 * math.exp(-(s - 40) / 5) + abs(rng.gauss(0, 0.01)),
            )
            series[keys.LOSS_ENTROPY][i] = (s, max(0.2, 1.3 - 0.08 * (s - 40)))
        if s == 50:
            series[keys.LOSS_GRAD_NORM][i] = (s, 12.0)
        if s >= 30:
            series[keys.REWARD_MEAN][i] = (s, min(0.95, 0.32 + 0.03 * (s - 30)) + rng.gauss(0, 0.03))
    return series


def collapsing(seed=0):
    """The same std, entropy and grad norm, but reward stagnates at ~0.42 (RAGEN) and falls from 55."""
    series = sharpening(seed)
    rng = random.Random(seed + 2)
    for i, (s, _) in enumerate(series[keys.REWARD_MEAN]):
        series[keys.REWARD_MEAN][i] = (s, max(0.05, 0.42 - 0.04 * max(0, s - 55)) + rng.gauss(0, 0.03))
    return series


def fully_collapsed_step(series):
    """First step where reward is within 10% of its final floor."""
    rewards = series[keys.REWARD_MEAN]
    floor, top = min(v for _, v in rewards), max(v for _, v in rewards)
    return next(s for s, v in rewards if v <= floor + 0.1 * (top - floor))


def rules(alerts):
    return [a.rule for a in alerts]


def test_healthy_noisy_series_raises_no_alert():
    for seed in range(5):
        assert EchoTrapDetector().detect(healthy(seed)) == []


def test_collapse_alerts_before_reward_has_collapsed():
    series = collapsing()
    alerts = EchoTrapDetector().detect(series)
    echo = [a for a in alerts if a.rule == "echo_trap"]
    assert echo, rules(alerts)
    assert echo[0].severity == "critical"
    assert echo[0].step < fully_collapsed_step(series)  # fully collapsed at step ~64
    assert echo[0].step < 55  # before the reward even starts to fall
    assert {"std_collapse", "entropy_drop"} <= set(rules(alerts))


def reward_series(values):
    """A run that logs only its reward (the std and entropy rules then never judge)."""
    return {keys.REWARD_MEAN: list(enumerate(values, start=1))}


def test_reward_fall_alerts_once_smoothed_reward_lost_half_its_best():
    # smoothed over 3: step 7 (0.4 + 0.4 + 0.3) / 3 = 0.367, step 8 (0.4 + 0.3 + 0.1) / 3 = 0.267 (fell
    # 0.133 < half of 0.4), step 9 (0.3 + 0.1 + 0.0) / 3 = 0.133 (fell 0.267 >= 0.2): the alert, while the
    # raw reward of step 9 (0.0) is the first zero and step 8's still 0.1
    alerts = EchoTrapDetector().detect(reward_series([0.4] * 6 + [0.3, 0.1, 0.0, 0.0, 0.0]))
    assert [(a.step, a.rule) for a in alerts] == [(9, "reward_fall")]
    assert alerts[0].evidence["peak"] == pytest.approx(0.4)
    assert alerts[0].evidence["fall"] == pytest.approx(0.4 - 0.4 / 3)  # best - (0.3 + 0.1 + 0.0) / 3
    assert "fell to 0.133 from its best 0.4" in alerts[0].message


def test_reward_fall_ignores_noise_on_small_rewards():
    # a best of 0.08 can fall at most 0.08, under reward_fall_min (0.1): noise around small rewards
    assert EchoTrapDetector().detect(reward_series([0.08, 0.0, 0.08, 0.08, 0.08, 0.08, 0.0, 0.0, 0.0])) == []
    # the same shape on larger rewards (best 0.8, fall 0.8) does alert
    assert rules(EchoTrapDetector().detect(reward_series([0.8, 0.0, 0.8, 0.8, 0.8, 0.8, 0.0, 0.0, 0.0]))) == [
        "reward_fall"
    ]


def test_std_collapse_evidence_has_the_numbers():
    alert = next(a for a in EchoTrapDetector().detect(collapsing()) if a.rule == "std_collapse")
    assert alert.evidence["fraction_of_peak"] < 0.3
    assert alert.evidence["peak"] == pytest.approx(
        alert.evidence["value"] / alert.evidence["fraction_of_peak"]
    )
    assert alert.start_step == alert.evidence["peak_step"] < 40
    assert "% of its peak" in alert.message and f"at step {alert.step}" in alert.message


def test_sharpening_while_reward_rises_raises_no_alert():
    """A converging policy's std and entropy fall too; with reward rising to its best that is no trap."""
    for seed in range(5):
        assert EchoTrapDetector().detect(sharpening(seed)) == []


def test_grad_spike_during_a_collapse_detected_at_its_step():
    spikes = [a for a in EchoTrapDetector().detect(collapsing()) if a.rule == "grad_spike"]
    assert [a.step for a in spikes] == [50]
    assert spikes[0].evidence["factor"] > 5


def test_isolated_grad_spike_alerts_only_when_asked():
    series = healthy()
    series[keys.LOSS_GRAD_NORM][60] = (60, 10.0)
    assert EchoTrapDetector().detect(series) == []
    alerts = EchoTrapDetector(EchoTrapConfig(isolated_grad_spikes=True)).detect(series)
    assert rules(alerts) == ["grad_spike"]
    assert alerts[0].step == 60
    assert alerts[0].evidence["factor"] > 5


def test_thresholds_are_configurable():
    series = healthy()
    series[keys.LOSS_GRAD_NORM][60] = (60, 10.0)
    assert (
        EchoTrapDetector(EchoTrapConfig(grad_spike_factor=20, isolated_grad_spikes=True)).detect(series) == []
    )
    lenient = EchoTrapDetector(EchoTrapConfig(std_collapse_ratio=0.01, entropy_drop_ratio=0.05))
    assert "echo_trap" not in rules(lenient.detect(collapsing()))
    ungated = EchoTrapDetector(EchoTrapConfig(reward_tolerance=1.0, reward_tolerance_rel=100.0))
    assert "echo_trap" in rules(ungated.detect(sharpening()))


def test_streaming_equals_batch():
    series = collapsing()
    detector = EchoTrapDetector()
    streamed = []
    for s in range(STEPS):
        streamed += detector.update(s, {key: points[s][1] for key, points in series.items()})
    assert streamed == EchoTrapDetector().detect(series)


def test_rule_fires_once_while_condition_holds_even_with_sparse_logging():
    series = collapsing()
    series[keys.LOSS_ENTROPY] = series[keys.LOSS_ENTROPY][::2]  # entropy logged every other step
    alerts = EchoTrapDetector().detect(series)
    assert rules(alerts).count("std_collapse") == 1
    assert rules(alerts).count("entropy_drop") == 1


def test_no_alert_during_warmup():
    series = {keys.REWARD_GROUP_STD_MEAN: [(0, 0.5), (1, 0.5), (2, 0.01), (3, 0.01)]}
    assert EchoTrapDetector(EchoTrapConfig(warmup_steps=5, smoothing=1)).detect(series) == []


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValidationError, match="std_ratio"):
        EchoTrapConfig(std_ratio=0.2)
    with pytest.raises(ValidationError, match="grad_spike_factor"):
        EchoTrapConfig(grad_spike_factor=0.5)
