"""Every estimator runs through the same call on the same Trajectory batch, as the loop uses them."""

import pytest
import torch

from trainers.advantages import ESTIMATORS, advantage_batch_from_trajectories
from trainers.trajectory import Trajectory, Turn

torch.set_num_threads(1)


def sample(k, reward):
    turns = [
        Turn("prompt", "q", [1, 2], [0, 0]),
        Turn("assistant", "call", [3, 4, 5], [1, 1, 1]),
        Turn("tool", "out", [6, 7], [0, 0]),
        Turn("assistant", "ans", [8], [1]),
    ]
    return Trajectory(uid=f"p/{k}", group_id="p", sample_index=k, turns=turns, reward=reward)


@pytest.mark.parametrize("name", ESTIMATORS.names())
def test_estimator_interface(name):
    trajectories = [sample(0, 1.0), sample(1, 0.0), sample(2, 0.0)]
    estimator = ESTIMATORS.get(name)()
    extra = {}
    if estimator.needs_values:
        extra["values"] = torch.zeros(3, 7)
    if estimator.needs_greedy_baseline:
        extra["baseline_rewards"] = {"p": 0.5}
    result = estimator.compute(advantage_batch_from_trajectories(trajectories, pad_to=7, **extra))
    assert result.advantages.shape == (3, 7)
    assert result.advantages[:, [3, 4, 6]].abs().sum() == 0  # tool tokens and padding get nothing
    assert result.advantages[0, 0] > 0 > result.advantages[1, 0]  # the rewarded sample is pushed up
    assert [len(turns) for turns in result.turn_advantages] == [2, 2, 2]
    assert (result.returns is not None) == estimator.needs_values


def test_gigpo_without_states_equals_grpo():
    trajectories = [sample(0, 1.0), sample(1, 0.0), sample(2, 0.0)]
    batch = advantage_batch_from_trajectories(trajectories)
    gigpo = ESTIMATORS.get("gigpo")().compute(batch)
    grpo = ESTIMATORS.get("grpo")().compute(batch)
    torch.testing.assert_close(gigpo.advantages, grpo.advantages)


def test_misaligned_tensor_is_named():
    with pytest.raises(ValueError, match="values has shape"):
        advantage_batch_from_trajectories([sample(0, 1.0)], values=torch.zeros(1, 3))
