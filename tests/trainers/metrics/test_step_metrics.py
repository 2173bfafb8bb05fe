"""compute_step_metrics on a hand-made batch."""

import pytest

from trainers.metrics import compute_step_metrics, keys
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


def traj(uid, group, reward, components, turns, finish="answer"):
    return Trajectory(
        uid=uid, group_id=group, reward=reward, rewards=components, turns=turns, finish_reason=finish
    )


def assistant(n_tokens, calls=(), results=()):
    return Turn(
        "assistant", "x", [0] * n_tokens, [1] * n_tokens, tool_calls=list(calls), tool_results=list(results)
    )


def tool(n_tokens):
    return Turn("tool", "o", [0] * n_tokens, [0] * n_tokens)


CALC = ToolCall("calculator", {"expression": "1+1"})
BAD = ToolCall("search", {}, parse_error="invalid JSON")
BATCH = [
    # group a: a tool user (2 calculator calls, one failed) and a direct answer
    traj(
        "a0",
        "a",
        1.0,
        {"correctness": 1.0, "format": 1.0},
        [
            assistant(
                4, [CALC, CALC], [ToolResult("calculator", True, "2"), ToolResult("calculator", False, "")]
            ),
            tool(3),
            assistant(2),
        ],
    ),
    traj("a1", "a", 0.0, {"correctness": 0.0, "format": 1.0}, [assistant(6)], finish="length"),
    # group b: equal rewards (zero variance); one malformed call that was never executed
    traj(
        "b0",
        "b",
        1.0,
        {"correctness": 1.0},
        [assistant(3, [BAD], [ToolResult("search", False, "", executed=False)]), assistant(1)],
    ),
    traj("b1", "b", 1.0, {"correctness": 1.0}, [assistant(5)]),
]


def test_reward_metrics():
    m = compute_step_metrics(BATCH)
    assert m[keys.REWARD_MEAN] == pytest.approx(0.75)  # (1 + 0 + 1 + 1) / 4
    assert m[keys.REWARD_STD] == pytest.approx(0.4330, abs=1e-4)  # population: sqrt(3*0.0625 + 0.5625) / 2
    assert m[keys.REWARD_GROUP_STD_MEAN] == pytest.approx(0.7071 / 2, abs=1e-4)  # (stdev(1,0)=0.7071 + 0) / 2
    assert m[keys.REWARD_ZERO_VARIANCE_FRAC] == pytest.approx(0.5)  # group b
    assert m["reward/correctness"] == pytest.approx(0.75)
    assert m["reward/format"] == pytest.approx(1.0)  # only the trajectories that have the component


def test_rollout_metrics():
    m = compute_step_metrics(BATCH)
    assert m[keys.RESPONSE_LENGTH] == pytest.approx(
        5.25
    )  # policy tokens (4+2, 6, 3+1, 5) / 4; tool tokens excluded
    assert m[keys.RESPONSE_LENGTH_MAX] == 6
    assert m[keys.TURNS] == pytest.approx(1.5)  # (2 + 1 + 2 + 1) / 4
    assert m[keys.TRUNCATED_FRAC] == pytest.approx(0.25)  # a1 stopped at the length limit


def test_tool_metrics():
    m = compute_step_metrics(BATCH)
    assert m[keys.TOOL_CALLS_PER_TRAJ] == pytest.approx(0.75)  # (2 + 0 + 1 + 0) / 4
    assert m["tools/calls/calculator"] == pytest.approx(0.5)
    assert m["tools/calls/search"] == pytest.approx(0.25)
    # of the three calls: calculator ok, calculator failed, search malformed (not run)
    assert m[keys.TOOL_SUCCESS_RATE] == pytest.approx(1 / 3)
    assert m[keys.TOOL_PARSE_ERROR_RATE] == pytest.approx(1 / 3)


def test_malformed_call_without_a_name_is_counted_under_a_named_series():
    unnamed = ToolCall(name="", arguments={}, parse_error="no JSON object")
    m = compute_step_metrics([traj("u", "g", 0.0, {}, [assistant(3, calls=[unnamed])])])
    assert m[keys.tool_calls_key("")] == 1.0
    assert keys.tool_calls_key("") == "tools/calls/(no name)"  # not the bare prefix, an unnamed series


def test_a_step_whose_calls_all_failed_to_parse_succeeded_on_none():
    m = compute_step_metrics([traj("u", "g", 0.0, {}, [assistant(3, calls=[BAD, BAD])])])
    assert (m[keys.TOOL_SUCCESS_RATE], m[keys.TOOL_PARSE_ERROR_RATE]) == (0.0, 1.0)


def test_rates_absent_without_tool_calls_and_filtered_frac_passed_through():
    m = compute_step_metrics([BATCH[1], BATCH[3]], filtered_frac=0.25)
    assert keys.TOOL_SUCCESS_RATE not in m
    assert m[keys.TOOL_CALLS_PER_TRAJ] == 0.0
    assert m[keys.FILTERED_FRAC] == 0.25


def test_component_named_like_a_summary_does_not_overwrite_it():
    assert keys.reward_component_key("mean") == "reward/component/mean"
    assert keys.reward_component_key("toolrl") == "reward/toolrl"
