"""ZeroTIR band, StarPO-S and DAPO dynamic sampling on hand-made groups."""

import pytest

from trainers.filters import FILTERS, apply_filters, group_trajectories
from trainers.trajectory import Trajectory


def group(gid, rewards, **metadata):
    return [
        Trajectory(
            uid=f"{gid}/{i}", group_id=gid, reward=r, rewards={"correctness": r}, metadata=dict(metadata)
        )
        for i, r in enumerate(rewards)
    ]


def groups(**rewards_by_group):
    return {gid: group(gid, rewards) for gid, rewards in rewards_by_group.items()}


def test_registry_names():
    assert FILTERS.names() == ["dapo_dynamic", "starpo_s", "zerotir_band"]


def test_zerotir_band_drops_groups_outside_0_2_to_0_8():
    # accuracies: all 5/5 = 1.0 (drop), easy 4/5 = 0.8 (keep, bound is inclusive),
    # mid 2/5 = 0.4 (keep), hard 1/5 = 0.2 (keep), none 0/5 = 0.0 (drop)
    g = groups(
        all=[1, 1, 1, 1, 1],
        easy=[1, 1, 1, 1, 0],
        mid=[1, 1, 0, 0, 0],
        hard=[1, 0, 0, 0, 0],
        none=[0, 0, 0, 0, 0],
    )
    result = FILTERS.get("zerotir_band")().apply(g)
    assert list(result.kept) == ["easy", "mid", "hard"]
    assert list(result.dropped) == ["all", "none"]
    assert result.filtered_frac == pytest.approx(2 / 5)
    assert result.needs_refill == 0


def test_zerotir_correctness_flag_wins_over_reward():
    # rewards say all correct, the flags say none: accuracy 0 -> dropped
    flagged = {"g": group("g", [1.0, 1.0], correct=False)}
    assert list(FILTERS.get("zerotir_band")().apply(flagged).dropped) == ["g"]


def test_zerotir_threshold_reads_plus_minus_one_rewards():
    # ToRL-style +1/-1: accuracy 1/2 with threshold 0 -> kept
    torl = {"g": group("g", [1.0, -1.0])}
    assert list(FILTERS.get("zerotir_band")(threshold=0.0).apply(torl).kept) == ["g"]


def test_starpo_s_keeps_top_quarter_by_reward_std():
    # sample stds: a [0,0]=0, b [0,1]=0.7071, c [0,2]=1.4142, d [1,1]=0 -> keep int(0.25*4)=1: c
    result = FILTERS.get("starpo_s")().apply(groups(a=[0, 0], b=[0, 1], c=[0, 2], d=[1, 1]))
    assert list(result.kept) == ["c"]
    assert result.filtered_frac == pytest.approx(0.75)


def test_starpo_s_fraction_and_minimum_one():
    g = groups(a=[0, 0], b=[0, 1], c=[0, 2], d=[1, 1])
    assert list(FILTERS.get("starpo_s")(keep_fraction=0.5).apply(g).kept) == ["b", "c"]
    assert len(FILTERS.get("starpo_s")(keep_fraction=0.1).apply(g).kept) == 1


def test_starpo_s_rejects_bad_fraction():
    with pytest.raises(ValueError, match="keep_fraction"):
        FILTERS.get("starpo_s")(keep_fraction=0.0)


def test_dapo_dynamic_drops_zero_variance_and_asks_for_refill():
    # b and d have equal rewards -> dropped; 2 kept of a target of 4 -> refill 2
    result = FILTERS.get("dapo_dynamic")(target_groups=4).apply(
        groups(a=[0, 1], b=[1, 1], c=[0, 0.5], d=[0, 0])
    )
    assert list(result.kept) == ["a", "c"]
    assert list(result.dropped) == ["b", "d"]
    assert result.needs_refill == 2


def test_dapo_dynamic_default_target_is_the_input_size():
    result = FILTERS.get("dapo_dynamic")().apply(groups(a=[0, 1], b=[1, 1], c=[2, 2]))
    assert result.needs_refill == 2


def test_chained_filters_accumulate_drops():
    # dapo drops d (all equal); starpo_s keeps the top half of the 3 left: int(1.5) = 1 -> c (std 1.41)
    g = groups(a=[0, 0.5], b=[0, 1], c=[0, 2], d=[1, 1])
    result = apply_filters([FILTERS.get("dapo_dynamic")(), FILTERS.get("starpo_s")(keep_fraction=0.5)], g)
    assert list(result.kept) == ["c"]
    assert set(result.dropped) == {"a", "b", "d"}
    assert result.filtered_frac == pytest.approx(0.75)
    assert result.needs_refill == 1


def test_group_trajectories_by_group_id():
    flat = group("x", [0, 1]) + group("y", [1])
    assert {k: len(v) for k, v in group_trajectories(flat).items()} == {"x": 2, "y": 1}
