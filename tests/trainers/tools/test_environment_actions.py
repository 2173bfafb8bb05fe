"""Several environment actions in one turn (RAGEN's `Left || Up`), capped per turn."""

from __future__ import annotations

import asyncio

import pytest

from trainers.tools.environment import DESCRIBE_NOTE, MAX_ACTIONS_PER_TURN, normalise_actions
from trainers.tools.toolset import Toolset
from trainers.trajectory import ToolCall

LAKE = {"grid": ["P___", "___G"]}


def lake(**config) -> Toolset:
    return Toolset.build([{"name": "frozenlake", "config": config}], initial_state=LAKE)


def turn(toolset: Toolset, *arguments: dict):
    return asyncio.run(toolset.call_many([ToolCall("frozenlake", a) for a in arguments]))


def test_ragen_action_text_becomes_a_list_of_lower_case_actions():
    assert normalise_actions({"action": "Left || Up"}) == {"actions": ["left", "up"]}
    assert normalise_actions({"action": " Down "}) == {"action": "down"}
    assert normalise_actions({"actions": ["Up", "RIGHT"]}) == {"actions": ["up", "right"]}
    assert normalise_actions("not a dict") == "not a dict"


@pytest.mark.parametrize("arguments", [{"action": "right || right"}, {"actions": ["right", "right"]}])
def test_one_call_takes_several_actions_in_order(arguments):
    toolset = lake()
    (result,) = turn(toolset, arguments)
    assert result.ok and result.output == "__P_\n___G\nreward: 0, done: false\nactions taken: right, right"
    assert toolset.environment.steps == 2


def test_the_cap_counts_over_all_calls_of_a_turn_and_resets_each_turn():
    toolset = lake(max_actions_per_turn=3)
    first, second, third = turn(
        toolset, {"action": "right || right"}, {"actions": ["right", "down"]}, {"action": "down"}
    )
    assert first.ok and toolset.environment.steps == 3
    assert second.output.endswith("actions taken: right\nnot taken (at most 3 actions per turn): down")
    assert (third.ok, third.error) == (False, "at most 3 actions per turn; no action of this call was taken")
    (next_turn,) = turn(toolset, {"action": "down"})
    assert next_turn.ok and next_turn.output.endswith("reward: 1, done: true")


def test_actions_after_the_episode_ends_in_the_same_call_are_not_taken():
    toolset = Toolset.build(["frozenlake"], initial_state={"grid": ["PG", "__"]})
    (result,) = turn(toolset, {"actions": ["right", "down"]})
    assert result.output.endswith("done: true\nactions taken: right\nnot taken (the episode is over): down")


def test_bad_action_lists_are_rejected_by_the_schema():
    bad_name, both, empty = turn(
        lake(), {"actions": ["right", "jump"]}, {"action": "up", "actions": ["up"]}, {"actions": []}
    )
    assert not bad_name.ok and "'jump' is not one of" in bad_name.error
    assert not both.ok and not empty.ok


def test_the_spec_offers_both_forms_and_states_the_cap():
    (spec,) = lake(max_actions_per_turn=2).specs()
    props = spec["function"]["parameters"]["properties"]
    assert set(props) == {"action", "actions"} and "at most 2 per turn" in props["actions"]["description"]
    (default,) = lake().specs()
    assert (
        f"at most {MAX_ACTIONS_PER_TURN} per turn"
        in default["function"]["parameters"]["properties"]["actions"]["description"]
    )


def test_a_cap_below_one_is_a_config_error():
    with pytest.raises(ValueError, match="max_actions_per_turn"):
        lake(max_actions_per_turn=0)


def test_describe_puts_the_surroundings_line_in_every_response_and_says_so_in_the_spec():
    described, plain = lake(describe=True), lake()
    assert DESCRIBE_NOTE in described.specs()[0]["function"]["description"]
    assert DESCRIBE_NOTE not in plain.specs()[0]["function"]["description"]
    (result,) = turn(described, {"action": "right"})
    grid, line = result.output.splitlines()[:2], result.output.splitlines()[2]
    assert grid == ["_P__", "___G"] and line == "up edge, down ice, left ice, right ice; goal 1 down 2 right"
