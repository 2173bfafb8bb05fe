"""Sokoban: levels made by reverse play are solvable; gym-sokoban's rewards; exact state hashes."""

from __future__ import annotations

from collections import deque

import pytest

from trainers.envs import Sokoban
from trainers.envs.base import MOVES


def solvable(env: Sokoban, max_states: int = 200_000) -> bool:
    """Breadth-first search over (player, boxes) with forward pushes only."""
    start = (env.player, frozenset(env.boxes))
    seen, frontier = {start}, deque([start])
    while frontier and len(seen) < max_states:
        player, boxes = frontier.popleft()
        if boxes == env.targets:
            return True
        for dr, dc in MOVES.values():
            ahead = (player[0] + dr, player[1] + dc)
            beyond = (ahead[0] + dr, ahead[1] + dc)
            if ahead not in env.floor:
                continue
            moved = boxes
            if ahead in boxes:
                if beyond not in env.floor or beyond in boxes:
                    continue
                moved = (boxes - {ahead}) | {beyond}
            state = (ahead, moved)
            if state not in seen:
                seen.add(state)
                frontier.append(state)
    return False


@pytest.mark.parametrize(("size", "num_boxes"), [(6, 1), (7, 2)])
def test_generated_levels_are_solvable_and_unsolved(size: int, num_boxes: int) -> None:
    for seed in range(25):
        env = Sokoban()
        env.reset({"seed": seed, "size": size, "num_boxes": num_boxes})
        assert len(env.boxes) == len(env.targets) == num_boxes
        assert env.boxes != env.targets
        assert solvable(env)


def test_same_seed_same_level() -> None:
    assert Sokoban().reset({"seed": 4}) == Sokoban().reset({"seed": 4})


def test_push_onto_target_and_solve() -> None:
    env = Sokoban()
    assert env.reset({"grid": ["######", "#PX_O#", "######"]}) == "######\n#PX_O#\n######"
    assert env.step("right") == ("######\n#_PXO#\n######", -0.1, False)
    obs, reward, done = env.step("right")
    assert (obs, round(reward, 6), done) == ("######\n#__P√#\n######", 10.9, True)


def test_pushing_a_box_off_its_target_costs_one() -> None:
    env = Sokoban()
    env.reset({"grid": ["######", "#P√_O#", "######"]})
    obs, reward, _ = env.step("right")
    assert obs == "######\n#_SXO#\n######"
    assert round(reward, 6) == -1.1


def test_box_against_a_wall_does_not_move() -> None:
    env = Sokoban()
    env.reset({"grid": ["#####", "#OPX#", "#####"]})
    assert env.step("right") == ("#####\n#OPX#\n#####", -0.1, False)


def test_render_round_trips_through_a_literal_grid() -> None:
    env = Sokoban()
    level = env.reset({"seed": 9, "size": 7, "num_boxes": 2})
    assert Sokoban().reset({"grid": level.splitlines()}) == level


def test_equal_states_hash_equal_whatever_the_path() -> None:
    a, b = Sokoban(), Sokoban()
    grid = ["#####", "#P__#", "#___#", "#X_O#", "#####"]
    a.reset({"grid": grid})
    b.reset({"grid": grid})
    for action in ("right", "down"):
        a.step(action)
    for action in ("down", "right"):
        b.step(action)
    assert a.state_hash() == b.state_hash()
    fresh = Sokoban()
    fresh.reset({"grid": grid})
    assert fresh.state_hash() != a.state_hash()


def test_describe_names_each_neighbour_what_a_push_meets_and_where_the_box_should_go() -> None:
    env = Sokoban(describe=True)
    env.reset({"grid": ["######", "#_O__#", "#PX__#", "######"]})
    assert env.observation().splitlines()[-1] == (
        "up floor, down wall, left wall, right box then floor; box 1 right, to target 1 up"
    )
    env.step("up")
    env.step("right")
    assert env.observation().splitlines()[-1] == (
        "up wall, down box then wall, left floor, right floor; box 1 down, to target 1 up"
    )


def line(env: Sokoban) -> str:
    return env.observation().splitlines()[-1]


def test_describe_names_the_push_toward_the_target_and_where_to_stand_for_it() -> None:
    env = Sokoban(describe=True)
    env.reset({"grid": ["######", "#____#", "#PX_O#", "#____#", "######"]})
    assert line(env).endswith("box 1 right, to target 2 right, push right from here")
    env.step("down")
    assert line(env).endswith("box 1 up 1 right, to target 2 right, push right from 1 up")


def test_the_push_named_is_the_nearer_of_two_when_the_box_must_move_along_both_axes() -> None:
    env = Sokoban(describe=True)
    # the box must go up and right: pushing right is stood for from its left (3 moves away), pushing up
    # from below it (1 move away)
    env.reset({"grid": ["######", "#___O#", "#_X__#", "#__P_#", "######"]})
    assert line(env).endswith("box 1 up 1 left, to target 1 up 2 right, push up from 1 left")


def test_a_push_into_a_dead_corner_is_not_named_though_it_is_nearer() -> None:
    env = Sokoban(describe=True)
    # pushing up from here would jam the box between two walls off its target; pushing left would not
    env.reset({"grid": ["#####", "#O_##", "#_X_#", "#_P_#", "#####"]})
    assert line(env).endswith("box 1 up, to target 1 up 1 left, push left from 1 up 1 right")


def test_no_push_is_named_when_none_moves_the_box_toward_its_target() -> None:
    env = Sokoban(describe=True)
    env.reset({"grid": ["######", "#_O__#", "#PX__#", "######"]})  # pushing up needs the wall below
    assert line(env).endswith("box 1 right, to target 1 up")
    env.reset({"grid": ["#######", "#PX_O_#", "###_###", "#######"]})
    env.step("down")  # a wall: the player stays; pushing right is stood for from where it is
    assert line(env).endswith("push right from here")


def test_describe_lists_no_box_once_every_box_is_on_a_target() -> None:
    env = Sokoban(describe=True)
    env.reset({"grid": ["#####", "#PXO#", "#####"]})
    observation, _, done = env.step("right")
    assert done
    assert observation.splitlines()[-1] == "up wall, down wall, left floor, right box on target then wall"
