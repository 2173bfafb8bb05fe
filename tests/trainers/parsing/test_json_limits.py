"""Deeply nested JSON in a model's call is a parse error, never a RecursionError later in the rollout."""

from __future__ import annotations

import asyncio
import json

import pytest

from trainers.parsing.json_limits import MAX_JSON_DEPTH, json_depth, too_deep
from trainers.parsing.tool_calls import parse_tagged_calls
from trainers.templates.artist import tool_arguments
from trainers.tools.calculator import Calculator
from trainers.trajectory import Trajectory, Turn


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_depth_is_counted_without_recursion():
    assert (json_depth(1), json_depth([]), json_depth({"a": [1, {"b": 2}]})) == (0, 1, 3)
    deep = json.loads(nested(900))
    assert json_depth(deep) == 900 and too_deep(deep)
    assert json_depth(deep, limit=10) == 11  # stops counting past the limit


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 900])
def test_deep_arguments_are_a_parse_error(depth):
    """900 levels parse, then asdict, schema checks and the sinks recursed out of the rollout."""
    body = '{"name": "calculator", "arguments": {"expression": ' + nested(depth) + "}}"
    (call,) = parse_tagged_calls(f"<tool_call>{body}</tool_call>")
    assert call.parse_error is not None and call.arguments == {}
    assert "deeper than" in call.parse_error or "RecursionError" in call.parse_error
    turn = Turn(role="assistant", text="", token_ids=[], loss_mask=[], tool_calls=[call])
    json.dumps(Trajectory(uid="u", group_id="g", sample_index=0, turns=[turn]).to_dict())


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 3, 900])
def test_deep_json_as_the_whole_call_or_a_string_argument_is_a_parse_error(depth):
    (call,) = parse_tagged_calls(f"<tool_call>{nested(depth)}</tool_call>")
    assert call.parse_error == f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
    encoded = json.dumps({"name": "calculator", "arguments": '{"a": ' + nested(depth) + "}"})
    (call,) = parse_tagged_calls(f"<tool_call>{encoded}</tool_call>")
    assert call.parse_error == f"'arguments' nested deeper than {MAX_JSON_DEPTH} levels"


def test_ordinary_nesting_still_parses():
    args = {"a": json.loads(nested(MAX_JSON_DEPTH - 1))}
    encoded = json.dumps({"name": "x", "arguments": args})
    (call,) = parse_tagged_calls(f"<tool_call>{encoded}</tool_call>")
    assert call.parse_error is None and call.arguments == args


def test_a_deep_call_reaches_the_tool_as_an_error_not_an_exception():
    body = '{"name": "calculator", "arguments": {"expression": ' + nested(900) + "}}"
    (call,) = parse_tagged_calls(f"<tool_call>{body}</tool_call>")
    result = asyncio.run(Calculator().invoke(call.arguments))
    assert not result.ok


@pytest.mark.parametrize("body", ['{"a": ' * 100_000, '{"a": ' + nested(900) + "}"])
def test_artist_keeps_a_too_deep_body_as_text(body):
    assert tool_arguments(body, None) == {"code": body}
