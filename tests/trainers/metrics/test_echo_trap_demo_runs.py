"""The refined detector on the calculator demo's two healthy 20-step GRPO runs (seeds 0 and 1, stored
metrics copied here to 4 decimals): the policy sharpens while reward rises, so nothing alerts."""

import pytest

from trainers.metrics import EchoTrapConfig, EchoTrapDetector, keys

SEED_0 = [  # step, reward/mean, reward/group_std_mean, loss/entropy, loss/grad_norm
    (1, 0.3438, 0.4876, 0.3237, 0.4520),
    (2, 0.4375, 0.3877, 0.2085, 1.3991),
    (3, 0.5781, 0.4945, 0.1609, 0.3889),
    (4, 0.5312, 0.4003, 0.1742, 0.5264),
    (5, 0.6719, 0.4650, 0.1272, 0.4048),
    (6, 0.6094, 0.5013, 0.1502, 0.4216),
    (7, 0.6719, 0.4761, 0.1365, 0.4886),
    (8, 0.6562, 0.4650, 0.1203, 0.3423),
    (9, 0.6719, 0.4761, 0.1039, 0.3635),
    (10, 0.6562, 0.4513, 0.1389, 1.0762),
    (11, 0.6250, 0.4351, 0.1152, 0.3797),
    (12, 0.7500, 0.2620, 0.0848, 0.1756),
    (13, 0.8594, 0.3299, 0.0617, 0.2090),
    (14, 0.8438, 0.3435, 0.0610, 0.4198),
    (15, 0.7969, 0.1904, 0.0472, 0.1580),
    (16, 0.8438, 0.2825, 0.0510, 0.8155),
    (17, 0.7656, 0.1689, 0.0773, 0.6972),
    (18, 0.8906, 0.2483, 0.0487, 0.6633),
    (19, 0.7969, 0.2178, 0.0386, 1.7730),
    (20, 0.8750, 0.2551, 0.0398, 0.3919),
]
SEED_1 = [  # step, reward/mean, reward/group_std_mean, loss/entropy, loss/grad_norm
    (1, 0.5938, 0.5039, 0.1890, 0.3914),
    (2, 0.5625, 0.4413, 0.1807, 0.5219),
    (3, 0.5625, 0.5013, 0.2118, 0.8756),
    (4, 0.4531, 0.5034, 0.2413, 0.4335),
    (5, 0.6406, 0.4898, 0.1809, 0.3379),
    (6, 0.6562, 0.4603, 0.1893, 0.3402),
    (7, 0.7031, 0.4229, 0.1428, 0.2819),
    (8, 0.8125, 0.3709, 0.0967, 1.2335),
    (9, 0.7500, 0.3425, 0.1287, 0.2708),
    (10, 0.7812, 0.3709, 0.1294, 0.2391),
    (11, 0.8281, 0.3267, 0.0894, 0.5193),
    (12, 0.5625, 0.2914, 0.1368, 0.4015),
    (13, 0.7812, 0.3798, 0.0960, 0.3833),
    (14, 0.8281, 0.2893, 0.0840, 0.2416),
    (15, 0.7031, 0.3640, 0.0928, 0.3836),
    (16, 0.6562, 0.3425, 0.0986, 1.9948),
    (17, 0.7500, 0.2857, 0.0530, 0.3599),
    (18, 0.8594, 0.2314, 0.0602, 1.0093),
    (19, 0.8594, 0.3062, 0.0598, 0.2859),
    (20, 0.7344, 0.0442, 0.0436, 0.1144),
]

COLUMNS = (keys.REWARD_MEAN, keys.REWARD_GROUP_STD_MEAN, keys.LOSS_ENTROPY, keys.LOSS_GRAD_NORM)


def series(rows):
    return {key: [(row[0], row[1 + i]) for row in rows] for i, key in enumerate(COLUMNS)}


@pytest.mark.parametrize("rows", [SEED_0, SEED_1], ids=["seed0", "seed1"])
def test_healthy_demo_run_raises_no_alert(rows):
    assert EchoTrapDetector().detect(series(rows)) == []


def test_the_ungated_rules_would_have_raised_the_demo_false_alarms():
    """Without the reward gate and with isolated spikes reported, these are the alerts the runs recorded."""
    gate_off = {"reward_tolerance": 10.0, "reward_tolerance_rel": 100.0}
    ungated = EchoTrapDetector(EchoTrapConfig(**gate_off, isolated_grad_spikes=True))
    assert [(a.rule, a.step) for a in ungated.detect(series(SEED_0))] == [("entropy_drop", 5)]
    assert [(a.rule, a.step) for a in ungated.detect(series(SEED_1))] == [
        ("entropy_drop", 14),
        ("grad_spike", 16),
    ]


# The same healthy demo run once turns end at the end of their message (the policy now trains its
# end-of-turn token): reward and entropy as logged, to 2 decimals. Entropy halves by step 9 while
# reward has gained 0.05 from 0.10, exactly the absolute tolerance: on a small reward that is learning.
TURN_END_REWARD = [0.10, 0.09, 0.11, 0.16, 0.11, 0.18, 0.15, 0.16, 0.14, 0.18,
                   0.27, 0.21, 0.33, 0.29, 0.35, 0.42, 0.42, 0.49, 0.44, 0.47]  # fmt: skip
TURN_END_ENTROPY = [2.47, 2.32, 1.47, 1.77, 1.49, 1.47, 1.24, 1.23, 1.13, 1.18,
                    1.21, 1.18, 1.19, 1.17, 1.16, 1.10, 1.04, 1.04, 1.02, 1.00]  # fmt: skip


def test_a_small_reward_rising_while_a_fresh_policy_sharpens_raises_no_alert():
    run = {
        keys.REWARD_MEAN: list(enumerate(TURN_END_REWARD, start=1)),
        keys.LOSS_ENTROPY: list(enumerate(TURN_END_ENTROPY, start=1)),
    }
    assert EchoTrapDetector().detect(run) == []
    # smoothed reward at the entropy peak (step 1) is 0.10 and at step 9 (0.15 + 0.16 + 0.14) / 3 = 0.15:
    # a gain of 0.05, within the absolute tolerance but above 25% of 0.10 (0.025)
    absolute_only = EchoTrapDetector(EchoTrapConfig(reward_tolerance_rel=10.0))
    assert [(a.rule, a.step) for a in absolute_only.detect(run)] == [("entropy_drop", 9)]


# The full demo's policy driven to collapse (tests/trainers/training/test_echo_trap_runs.py, RL seed 1,
# recorded 2026-12-03): reward peaks at 0.47, declines over three steps, touches 0 at step 15, flickers
# and scores 0 for good from step 21. How such a run falls differs between CPUs (on another machine of
# the same kind the three seeds fell off a cliff in one update), so the warning ahead is judged here, on
# the stored series, and the live runs assert only what holds on every CPU.
COLLAPSE_SEED_1 = [  # step, reward/mean, reward/group_std_mean, loss/entropy, loss/grad_norm
    (1, 0.1562, 0.2336, 0.2708, 0.3675),
    (2, 0.0312, 0.0579, 0.3889, 0.1349),
    (3, 0.0781, 0.1599, 0.3955, 0.3375),
    (4, 0.1562, 0.2383, 0.4479, 0.2683),
    (5, 0.3281, 0.3051, 0.2082, 0.2211),
    (6, 0.0156, 0.0442, 0.2895, 0.2133),
    (7, 0.1250, 0.1825, 0.1954, 0.4668),
    (8, 0.1875, 0.1873, 0.1622, 0.4892),
    (9, 0.1250, 0.1336, 0.1734, 0.4034),
    (10, 0.4688, 0.3220, 0.1190, 0.6415),
    (11, 0.2656, 0.0442, 0.1897, 0.2675),
    (12, 0.1250, 0.0000, 0.2814, 0.0000),
    (13, 0.0312, 0.0579, 0.2300, 0.1391),
    (14, 0.0781, 0.0647, 0.1705, 0.1204),
    (15, 0.0000, 0.0000, 0.2301, 0.0000),
    (16, 0.0156, 0.0442, 0.2536, 0.2031),
    (17, 0.0000, 0.0000, 0.2425, 0.0000),
    (18, 0.0000, 0.0000, 0.2444, 0.0000),
    (19, 0.1719, 0.1804, 0.1510, 0.5711),
    (20, 0.0469, 0.1021, 0.3123, 0.3498),
    (21, 0.0000, 0.0000, 0.2411, 0.0000),
    (22, 0.0000, 0.0000, 0.1823, 0.0000),
    (23, 0.0000, 0.0000, 0.2874, 0.0000),
    (24, 0.0000, 0.0000, 0.2669, 0.0000),
]


def test_a_real_decline_is_flagged_before_reward_first_hits_zero():
    alerts = EchoTrapDetector().detect(series(COLLAPSE_SEED_1))
    first = alerts[0]
    assert first.step == 13 and first.rule in ("std_collapse", "reward_fall")
    # two steps before the first step with no reward at all, while smoothed reward is still 0.14
    first_zero = min(step for step, reward, *_ in COLLAPSE_SEED_1 if reward == 0)
    assert first.step <= first_zero - 2
    assert first.evidence["reward_mean" if first.rule == "std_collapse" else "value"] > 0.1
