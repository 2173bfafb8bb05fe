"""FrozenLake: seeded solvable levels, Gym's rewards, exact state hashes."""

from __future__ import annotations

import pytest

from trainers.envs import FrozenLake
from trainers.envs.frozenlake import has_path


@pytest.mark.parametrize("size", [3, 4, 6])
def test_generated_levels_have_a_path(size: int) -> None:
    for seed in range(40):
        env = FrozenLake()
        env.reset({"seed": seed, "size": size, "p_frozen": 0.6})
        assert has_path(env.holes, (size, size), env.player, env.goal)


def test_same_seed_same_level_different_seed_different_level() -> None:
    levels = [FrozenLake().reset({"seed": seed}) for seed in (7, 7, 8)]
    assert levels[0] == levels[1]
    assert levels[0] != levels[2]


def test_seed_argument_is_used_when_the_row_has_none() -> None:
    assert FrozenLake().reset(seed=5) == FrozenLake().reset({"seed": 5})


def test_reaching_the_goal_pays_one_and_ends() -> None:
    env = FrozenLake()
    env.reset({"grid": ["P_G", "_O_", "___"]})
    assert env.step("right") == ("_PG\n_O_\n___", 0.0, False)
    assert env.step("right") == ("__W\n_O_\n___", 1.0, True)
    assert (env.last_reward, env.total_reward) == (1.0, 1.0)


def test_falling_into_a_hole_ends_with_zero() -> None:
    env = FrozenLake()
    env.reset({"grid": ["_P_", "_O_", "__G"]})
    assert env.step("down") == ("___\n_X_\n__G", 0.0, True)


def test_walking_off_the_edge_stays_put() -> None:
    env = FrozenLake()
    env.reset({"grid": ["P_", "_G"]})
    assert env.step("up")[0] == "P_\n_G"


def test_max_steps_ends_the_episode() -> None:
    env = FrozenLake(max_steps=2)
    env.reset({"grid": ["P_", "_G"]})
    env.step("up")
    assert env.step("left")[2] is True


def test_no_action_after_the_end() -> None:
    env = FrozenLake()
    env.reset({"grid": ["PG"]})
    env.step("right")
    with pytest.raises(ValueError, match="episode is over"):
        env.step("left")


def test_equal_states_hash_equal_whatever_the_path() -> None:
    a, b = FrozenLake(), FrozenLake()
    a.reset({"grid": ["P__", "___", "__G"]})
    b.reset({"grid": ["P__", "___", "__G"]})
    a.step("right")
    a.step("down")
    b.step("down")
    b.step("right")
    assert a.state_hash() == b.state_hash()
    a.step("down")
    assert a.state_hash() != b.state_hash()


def test_slippery_ice_is_reproducible_from_the_seed() -> None:
    def walk() -> list[str]:
        env = FrozenLake(slip_prob=0.5, max_steps=50)
        env.reset({"seed": 11, "size": 6, "p_frozen": 1.0})
        return [env.step(a)[0] for a in ["down", "right"] * 4]

    assert walk() == walk()


def test_unknown_level_parameter_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="bad initial_state for frozenlake"):
        FrozenLake().reset({"seed": 1, "difficulty": "hard"})


def test_describe_adds_the_surroundings_under_the_grid_and_follows_the_player() -> None:
    env = FrozenLake(describe=True)
    first = env.reset({"grid": ["P_G", "O__", "___"]})
    assert first == "P_G\nO__\n___\nup edge, down hole, left edge, right ice; goal 2 right"
    assert env.step("right")[0].splitlines()[-1] == "up edge, down ice, left ice, right goal; goal 1 right"


def test_describe_leaves_the_state_hash_alone() -> None:
    plain, described = FrozenLake(), FrozenLake(describe=True)
    plain.reset({"seed": 3})
    described.reset({"seed": 3})
    assert described.observation().startswith(plain.observation() + "\n")
    assert plain.state_hash() == described.state_hash()
