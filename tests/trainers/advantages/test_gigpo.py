"""GiGPO episode + anchor-state step advantages, built from Trajectory records, against hand values."""

import pytest
import torch

from trainers.advantages import ESTIMATORS, advantage_batch_from_trajectories, write_advantages
from trainers.trajectory import Trajectory, Turn

torch.set_num_threads(1)


def episode(uid, group, reward, steps):
    """Each step: (state_hash, env_reward, state text after it) -> assistant(2 tokens) + tool(1 token)."""
    turns = [Turn("prompt", "q", [1, 2], [0, 0])]
    for state_hash, env_reward, after in steps:
        turns.append(
            Turn("assistant", "a", [3, 4], [1, 1], state_hash=state_hash, env_reward=env_reward, state=after)
        )
        turns.append(Turn("tool", "o", [5], [0]))
    return Trajectory(uid=uid, group_id=group, turns=turns, reward=reward)


def make_group():
    """One group of three episodes. States: all start from A; then B, C or B again."""
    return [
        episode("t0", "g", 1.0, [("A", 0.0, "b"), ("B", 1.0, "x")]),  # R_t (gamma .5): (0.5, 1)
        episode("t1", "g", 0.0, [("A", 0.0, "c"), ("C", 0.0, "y")]),  # (0, 0)
        episode("t2", "g", 0.0, [("A", 0.0, "b"), ("B", 0.0, "z")]),  # (0, 0)
    ]


def test_gigpo_without_std_scaling():
    # A_E = R - mean(1, 0, 0) = (2/3, -1/3, -1/3)
    # anchor A: returns (0.5, 0, 0), mean 1/6 -> (1/3, -1/6, -1/6)
    # anchor B: (t0 step1: 1, t2 step1: 0), mean 0.5 -> (0.5, -0.5); anchor C is a singleton -> 0
    # A = A_E + 1 * A_S: t0 (1, 7/6), t1 (-1/2, -1/3), t2 (-1/2, -5/6)
    result = ESTIMATORS.get("gigpo")(gamma=0.5, norm="none").compute(
        advantage_batch_from_trajectories(make_group())
    )
    expected_turns = [[1.0, 7 / 6], [-0.5, -1 / 3], [-0.5, -5 / 6]]
    for got, want in zip(result.turn_advantages, expected_turns, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    # tokens: assistant(2) tool(1) assistant(2) tool(1); tool tokens get 0
    torch.testing.assert_close(result.advantages[0], torch.tensor([1.0, 1.0, 0.0, 7 / 6, 7 / 6, 0.0]))


def test_gigpo_with_std_scaling_and_omega():
    # A_E: rewards (1, 0, 0), sample std sqrt(1/3) = 0.57735 -> (1.1547, -0.57735, -0.57735)
    # anchor A: (0.5, 0, 0), std 0.288675 -> (1.1547, -0.57735, -0.57735)
    # anchor B: (1, 0), std 0.70711 -> (0.70711, -0.70711)
    # omega 0.5: t0 (1.1547 + 0.57735, 1.1547 + 0.35355) = (1.7321, 1.5083)
    #            t1 (-0.57735 - 0.28868, -0.57735) = (-0.8660, -0.57735)
    #            t2 (-0.8660, -0.57735 - 0.35355) = (-0.8660, -0.9309)
    gigpo = ESTIMATORS.get("gigpo")(gamma=0.5, omega=0.5, norm="std", eps=0.0)
    result = gigpo.compute(advantage_batch_from_trajectories(make_group()))
    got = torch.tensor(result.turn_advantages)
    expected = torch.tensor([[1.7321, 1.5083], [-0.8660, -0.57735], [-0.8660, -0.9309]])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_anchor_groups_never_cross_trajectory_groups():
    # the same state "A" in two different prompts' groups: both singletons -> A_S = 0, A = A_E = 0
    other = [episode("x", "g1", 1.0, [("A", 1.0, "s")]), episode("y", "g2", 0.0, [("A", 0.0, "s")])]
    result = ESTIMATORS.get("gigpo")(norm="none").compute(advantage_batch_from_trajectories(other))
    assert result.turn_advantages == [[0.0], [0.0]]
    assert result.step_groups == [["g1|A"], ["g2|A"]]


def test_similarity_grouping_joins_near_identical_states():
    # state texts after step 0 (the states step 1 acts from): "grid ....G" vs "grid ....X": ratio 0.9
    pair = [
        episode("p", "g", 1.0, [("s0", 0.0, "grid ....G"), ("h1", 1.0, "end")]),
        episode("q", "g", 1.0, [("s0", 0.0, "grid ....X"), ("h2", 0.0, "end")]),
    ]
    batch = advantage_batch_from_trajectories(pair)
    exact = ESTIMATORS.get("gigpo")(gamma=1.0, norm="none").compute(batch)
    similar = ESTIMATORS.get("gigpo")(gamma=1.0, norm="none", similarity_threshold=0.8).compute(batch)
    assert exact.turn_advantages[0][1] == 0.0  # h1 and h2 differ: singletons
    # similar: step-1 returns (1, 0), mean 0.5 -> A_S (0.5, -0.5); A_E = 0 (equal rewards)
    assert similar.turn_advantages[0][1] == 0.5
    assert similar.turn_advantages[1][1] == -0.5
    assert similar.step_groups[0][1] == similar.step_groups[1][1]


def test_write_advantages_records_turns_and_anchor_groups():
    trajectories = make_group()
    result = ESTIMATORS.get("gigpo")(gamma=0.5, norm="none").compute(
        advantage_batch_from_trajectories(trajectories)
    )
    write_advantages(trajectories, result)
    # t0: turn advantages (1, 7/6) on 2 + 2 policy tokens -> trajectory mean 13/12
    assert [t.advantage for t in trajectories[0].assistant_turns] == pytest.approx([1.0, 7 / 6])
    assert trajectories[0].advantage == pytest.approx(13 / 12)
    assert trajectories[0].metadata["anchor_groups"] == ["g|A", "g|B"]
