import pytest
from pydantic import ValidationError

from trainers.rewards import REWARDS, RewardContext
from trainers.rewards.overlong import overlong_penalty
from trainers.trajectory import Turn

CTX = RewardContext()


def test_overlong_penalty_regions_of_dapo_eq_13():
    # L_max = 20, L_cache = 4: no penalty up to 16, linear to -1 at 20, -1 beyond
    assert overlong_penalty(16, 20, 4) == 0.0
    assert overlong_penalty(17, 20, 4) == pytest.approx(-0.25)
    assert overlong_penalty(20, 20, 4) == pytest.approx(-1.0)
    assert overlong_penalty(21, 20, 4) == -1.0


def test_overlong_counts_policy_tokens_only(make_traj):
    traj = make_traj("x", policy_tokens=18)
    traj.turns.append(Turn(role="tool", text="out", token_ids=[5] * 50, loss_mask=[0] * 50))
    assert REWARDS.get("overlong")(max_length=20, cache_length=4).score(traj, CTX) == pytest.approx(-0.5)


def test_overlong_rejects_a_cache_longer_than_the_limit():
    with pytest.raises(ValidationError, match="cache_length"):
        REWARDS.get("overlong")(max_length=10, cache_length=20)


def env_traj(make_traj, rewards):
    turns = [Turn(role="assistant", text="a", token_ids=[1], loss_mask=[1], env_reward=r) for r in rewards]
    return make_traj(turns=turns)


def test_env_reward_sums_steps(make_traj):
    assert REWARDS.get("env")().score(env_traj(make_traj, [0.0, -0.1, 1.0]), CTX) == pytest.approx(0.9)


def test_env_reward_discounts_steps(make_traj):
    env = REWARDS.get("env")(aggregate="discounted", gamma=0.5)
    assert env.score(env_traj(make_traj, [1.0, 1.0, 4.0]), CTX) == pytest.approx(1 + 0.5 + 1.0)
