"""advantage_batch_from_trajectories: token layout, step spans, step rewards and states."""

import pytest
import torch

from trainers.advantages import advantage_batch_from_trajectories
from trainers.trajectory import Trajectory, Turn

torch.set_num_threads(1)


def tool_use(uid="t", reward=1.0):
    return Trajectory(
        uid=uid,
        group_id="g",
        reward=reward,
        turns=[
            Turn("prompt", "q", [1, 2, 3], [0, 0, 0]),
            Turn("assistant", "call", [4, 5], [1, 1]),
            Turn("tool", "out", [6, 7, 8], [0, 0, 0]),
            Turn("assistant", "ans", [9], [1]),
        ],
    )


def test_response_tokens_are_columns_and_prompt_is_excluded():
    short = Trajectory(
        uid="s", group_id="g", turns=[Turn("prompt", "q", [1], [0]), Turn("assistant", "a", [2], [1])]
    )
    batch = advantage_batch_from_trajectories([tool_use(), short])
    assert batch.response_mask.tolist() == [[1, 1, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0]]
    assert batch.rewards.tolist() == [1.0, 0.0]


def test_steps_span_assistant_turns_and_outcome_reward_goes_on_last_step():
    steps = advantage_batch_from_trajectories([tool_use(reward=0.7)]).steps[0]
    assert [(s.start, s.end) for s in steps] == [(0, 2), (5, 6)]
    assert [s.reward for s in steps] == [0.0, pytest.approx(0.7)]


def test_env_rewards_and_states_are_read_per_turn():
    trajectory = tool_use()
    trajectory.metadata["initial_state"] = "S0"
    trajectory.turns[1].env_reward, trajectory.turns[1].state_hash, trajectory.turns[1].state = (
        0.5,
        "h0",
        "S1",
    )
    trajectory.turns[3].env_reward, trajectory.turns[3].state_hash = None, "h1"
    steps = advantage_batch_from_trajectories([trajectory]).steps[0]
    assert [(s.reward, s.state_hash, s.state_text) for s in steps] == [(0.5, "h0", "S0"), (0.0, "h1", "S1")]


def test_pad_to_fixes_the_width():
    assert advantage_batch_from_trajectories([tool_use()], pad_to=10).response_mask.shape == (1, 10)
    with pytest.raises(ValueError, match="shorter"):
        advantage_batch_from_trajectories([tool_use()], pad_to=3)
