"""A dataset row's `initial_state` is untrusted: a level that is not one is refused by name, at once."""

from __future__ import annotations

import pytest

from trainers.envs.base import MAX_SIDE
from trainers.envs.frozenlake import FrozenLake
from trainers.envs.sokoban import Sokoban
from trainers.tools.toolset import Toolset

BAD_LAKES = [
    ({"seed": 1, "size": 1}, "size must be a whole number from 2 to 16, not 1"),
    ({"seed": 1, "size": 0}, "size must be a whole number from 2 to 16, not 0"),
    ({"seed": 1, "size": 100_000}, "size must be a whole number from 2 to 16, not 100000"),
    ({"seed": 1, "size": 4.5}, "size must be a whole number"),
    ({"seed": 1, "size": True}, "size must be a whole number"),
    ({"seed": 1, "p_frozen": 0}, "p_frozen must be a number above 0 and at most 1, not 0"),
    ({"seed": 1, "p_frozen": "high"}, "p_frozen must be a number"),
    ({"grid": "P_G"}, "grid must be a list of rows"),
    ({"grid": [1, 2]}, "grid must be a list of rows"),
    ({"grid": []}, "grid must have 1 to 16 rows"),
    ({"grid": ["P" + "_" * MAX_SIDE]}, "grid must have 1 to 16 rows of 1 to 16 symbols"),
    ({"grid": ["P_"] + ["__"] * MAX_SIDE}, "grid must have 1 to 16 rows"),
    ({"grid": ["P_G", "__"]}, "grid rows must all have the same length"),
    ({"grid": ["P_G", "_?_"]}, "unknown symbols '?' in grid"),
    ({"grid": ["___", "__G"]}, "grid must hold exactly one player (P, X or W), not 0"),
    ({"grid": ["P_P", "__G"]}, "grid must hold exactly one player (P, X or W), not 2"),
    ({"grid": ["P__", "___"]}, "grid must hold exactly one goal (G or W), not 0"),
    ({"grid": ["P_G", "__G"]}, "grid must hold exactly one goal (G or W), not 2"),
]

BAD_ROOMS = [
    ({"seed": 1, "size": 3}, "size must be a whole number from 4 to 16, not 3"),
    ({"seed": 1, "size": 17}, "size must be a whole number from 4 to 16, not 17"),
    ({"seed": 1, "size": 5, "num_boxes": 0}, "num_boxes must be a whole number from 1 to 7, not 0"),
    ({"seed": 1, "size": 5, "num_boxes": 8}, "num_boxes must be a whole number from 1 to 7, not 8"),
    ({"seed": 1, "reverse_steps": 10**9}, "reverse_steps must be a whole number from 1 to 1000"),
    ({"grid": ["#####", "#P_O#", "#####"]}, "at least one box and a target for each, not 0 boxes and 1"),
    ({"grid": ["######", "#PXXO#", "######"]}, "a target for each, not 2 boxes and 1 targets"),
    ({"grid": ["#####", "#_XO#", "#####"]}, "grid must hold exactly one player (P or S), not 0"),
    ({"grid": ["#####", "#PXO#", "#=###"]}, "unknown symbols '=' in grid"),
]


@pytest.mark.parametrize(("state", "message"), BAD_LAKES)
def test_a_lake_that_is_not_a_level_is_refused_by_name(state, message) -> None:
    with pytest.raises(ValueError, match="bad initial_state for frozenlake: ") as caught:
        FrozenLake().reset(state)
    assert message in str(caught.value)


@pytest.mark.parametrize(("state", "message"), BAD_ROOMS)
def test_a_room_that_is_not_a_level_is_refused_by_name(state, message) -> None:
    with pytest.raises(ValueError, match="bad initial_state for sokoban: ") as caught:
        Sokoban().reset(state)
    assert message in str(caught.value)


def test_a_rollout_meets_the_same_refusal_when_it_builds_the_tools() -> None:
    with pytest.raises(ValueError, match="bad initial_state for frozenlake: size must be a whole number"):
        Toolset.build(["calculator", "frozenlake"], initial_state={"seed": 3, "size": 10**6})


def test_the_largest_levels_allowed_are_generated_and_played() -> None:
    lake, room = FrozenLake(), Sokoban()
    assert len(lake.reset({"seed": 2, "size": MAX_SIDE}).splitlines()) == MAX_SIDE
    assert len(room.reset({"seed": 2, "size": MAX_SIDE, "num_boxes": 2}).splitlines()) == MAX_SIDE
    assert sum(row.count("X") + row.count("√") for row in room.render()) == 2
    lake.step("down")
    room.step("up")


def test_literal_levels_keep_loading_as_before() -> None:
    lake, room = FrozenLake(), Sokoban()
    assert lake.reset({"grid": ["W_", "__"]}) == "W_\n__"  # the player already on the goal
    assert room.reset({"grid": ["#####", "#S√_#", "#####"]}) == "#####\n#S√_#\n#####"
    assert room.step("left") == ("#####\n#S√_#\n#####", -0.1, False)  # into the wall
