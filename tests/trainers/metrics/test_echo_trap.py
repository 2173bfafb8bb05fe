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
    assert alerts[0].message.startswith(
        # the peak at step 3: (0.4 + 0.4 + 0.4) / 3 rounds a hair above 0.4
        "Reward mean fell from its best 0.4 at step 3 to 0.133 at step 9 (6 steps, smoothed over 3):"
        " the policy is getting worse"
    )


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
    peak, reward = alert.evidence, alert.evidence["reward_mean"]
    assert f"of its peak, from {peak['peak']:.3g} at step {peak['peak_step']}" in alert.message
    assert f"at step {alert.step}, while reward mean" in alert.message
    assert f"to {reward:.3g} over" in alert.message
    assert alert.message.endswith("so GRPO has less to compare (the echo trap's first sign).")


def test_every_message_says_what_the_numbers_mean():
    """Each rule's message quotes its evidence, then (after a colon) what it means, as a sentence."""
    alerts = EchoTrapDetector().detect(collapsing())
    assert {"std_collapse", "entropy_drop", "grad_spike", "echo_trap"} <= set(rules(alerts))
    for alert in alerts:
        assert alert.message[0].isupper() and alert.message.endswith("."), alert.message
        assert ": " in alert.message and " then" not in alert.message, alert.message


def stuck(frac, steps, reward=0.0):
    """A run whose groups mostly score alike: `frac` of them with zero reward variance on every step."""
    return {
        keys.REWARD_ZERO_VARIANCE_FRAC: [(s, frac) for s in range(1, steps + 1)],
        keys.REWARD_MEAN: [(s, reward) for s in range(1, steps + 1)],
    }


def test_no_learning_signal_alerts_once_after_n_steps_of_mostly_equal_groups():
    alerts = EchoTrapDetector().detect(stuck(1.0, 20))
    assert [(a.rule, a.step, a.start_step, a.severity) for a in alerts] == [("no_signal", 5, 1, "warning")]
    assert alerts[0].evidence == {"zero_variance_frac": 1.0, "steps": 5.0, "reward_mean": 0.0}
    assert alerts[0].message.startswith(
        "Every group had equal rewards on every step from 1 to 5: their advantages are zero, so the policy"
        " learns nothing from them. Reward mean is 0: if every sample fails"
    )
    # 85% of the groups is "most" (the default threshold is 80%), named as a share
    assert "85% or more of the groups" in EchoTrapDetector().detect(stuck(0.85, 5))[0].message


def test_a_policy_that_learned_until_its_groups_agree_has_converged_not_lost_its_signal():
    """Reward rose from 0.3 to 1.0, then every group scores alike: no alert. The same agreement after a
    fall back to where it started (every sample failing) is flagged."""
    rewards = [0.3] * 5 + [0.3 + 0.07 * i for i in range(1, 11)] + [1.0] * 15
    fracs = [0.2] * 15 + [1.0] * 15
    learned = {
        keys.REWARD_MEAN: list(enumerate(rewards, start=1)),
        keys.REWARD_ZERO_VARIANCE_FRAC: list(enumerate(fracs, start=1)),
    }
    assert EchoTrapDetector().detect(learned) == []
    fell = {**learned, keys.REWARD_MEAN: list(enumerate(rewards[:15] + [0.0] * 15, start=1))}
    assert [(a.rule, a.step) for a in EchoTrapDetector().detect(fell)] == [
        ("reward_fall", 17),
        ("no_signal", 20),
    ]


def test_no_learning_signal_needs_n_steps_in_a_row_and_re_arms():
    fracs = [1.0] * 4 + [0.5] + [1.0] * 4 + [0.3] + [0.9] * 6
    series = {keys.REWARD_ZERO_VARIANCE_FRAC: list(enumerate(fracs, start=1))}
    assert [(a.rule, a.step) for a in EchoTrapDetector().detect(series)] == [("no_signal", 15)]
    assert EchoTrapDetector().detect(stuck(0.7, 30)) == []  # most groups still learn something
    strict = EchoTrapDetector(EchoTrapConfig(no_signal_frac=0.95, no_signal_steps=2))
    assert strict.detect(stuck(0.9, 30)) == []
    assert [a.step for a in EchoTrapDetector(EchoTrapConfig(no_signal_steps=2)).detect(stuck(0.9, 30))] == [2]


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
