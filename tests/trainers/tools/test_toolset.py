"""The per-trajectory toolset: building from bindings, specs, concurrent calls in call order, errors."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from pydantic import BaseModel

from trainers.registry import RegistryError
from trainers.tools import TOOLS, ToolBinding, Toolset
from trainers.trajectory import ToolCall


def test_builtins_are_registered() -> None:
    assert {"python", "calculator", "search", "http", "frozenlake", "sokoban"} <= set(TOOLS.names())


def test_bindings_accept_names_dicts_and_models() -> None:
    toolset = Toolset.build(
        ["calculator", {"name": "search", "config": {"top_k": 1}}, ToolBinding(name="sokoban")]
    )
    assert list(toolset.tools) == ["calculator", "search", "sokoban"]
    assert [s["function"]["name"] for s in toolset.specs()] == ["calculator", "search", "sokoban"]


def test_bindings_accept_other_pydantic_models_with_name_and_config() -> None:
    class RunConfigBinding(BaseModel):
        name: str
        config: dict = {}

    toolset = Toolset.build([RunConfigBinding(name="calculator", config={"max_bits": 64})])
    assert toolset.tools["calculator"].max_bits == 64


def test_binding_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        ToolBinding(name="calculator", confg={})


def test_unknown_tool_name_raises_registry_error() -> None:
    with pytest.raises(RegistryError, match="unknown tool 'shell'; known: calculator"):
        Toolset.build(["shell"])


def test_bad_tool_config_names_the_tool() -> None:
    with pytest.raises(ValueError, match="bad config for tool 'calculator'"):
        Toolset.build([{"name": "calculator", "config": {"precision": 3}}])


def test_two_tools_with_one_name_are_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="two tools are named 'http'"):
        Toolset.build([{"name": "http", "config": {"url": endpoint}}] * 2)


def test_each_build_makes_fresh_instances() -> None:
    first, second = Toolset.build(["sokoban"], seed=1), Toolset.build(["sokoban"], seed=1)
    asyncio.run(first.call_many([ToolCall("sokoban", {"action": "up"})]))
    assert first.environment is not second.environment
    assert second.environment.steps == 0


def test_calls_run_concurrently_and_keep_call_order(endpoint: str) -> None:
    toolset = Toolset.build([{"name": "http", "config": {"url": endpoint}}, "calculator"])
    # The endpoint answers the three HTTP calls only once all three are in at the same time (a
    # barrier), so sequential calls fail; the sleeps make them finish in another order than called.
    meet = {"meet": f"turn-{uuid.uuid4().hex}", "parties": 3}
    calls = [
        ToolCall("http", {**meet, "sleep": 0.2, "n": 1}),
        ToolCall("calculator", {"expression": "6*7"}),
        ToolCall("http", {**meet, "sleep": 0.0, "n": 2}),
        ToolCall("http", {**meet, "sleep": 0.1, "n": 3}),
    ]

    async def run() -> list:
        try:
            return await toolset.call_many(calls)
        finally:
            await toolset.close()

    results = asyncio.run(run())
    assert [(r.name, r.ok) for r in results] == [("http", True), ("calculator", True)] + [("http", True)] * 2
    assert [json.loads(r.output)["echo"]["n"] for r in (results[0], results[2], results[3])] == [1, 2, 3]
    assert results[1].output == "42"


def test_malformed_and_unknown_calls_become_error_results() -> None:
    toolset = Toolset.build(["calculator"])
    calls = [
        ToolCall("calculator", {}, raw="{bad", parse_error="invalid JSON in tool call"),
        ToolCall("weather", {"city": "Oslo"}),
        ToolCall("calculator", {"expression": "1+1"}),
    ]
    results = asyncio.run(toolset.call_many(calls))
    assert [(r.ok, r.executed) for r in results] == [(False, False), (False, False), (True, True)]
    assert results[0].output == "malformed tool call: invalid JSON in tool call"
    assert results[1].output == "unknown tool 'weather'; available tools: calculator"
    assert results[2].output == "2"


def test_argument_validation_errors_are_results() -> None:
    results = asyncio.run(
        Toolset.build(["calculator"]).call_many([ToolCall("calculator", {"expression": 3})])
    )
    assert not results[0].ok
    assert results[0].error == "invalid arguments for calculator at expression: 3 is not of type 'string'"


def test_environment_is_exposed_and_reset_from_initial_state() -> None:
    toolset = Toolset.build(["calculator", "sokoban"], initial_state={"grid": ["#####", "#PX_O", "#####"]})
    assert toolset.environment.observation() == "#####\n#PX_O\n#####"


def test_toolset_without_an_environment_exposes_none() -> None:
    assert Toolset.build(["calculator"]).environment is None


def test_environment_actions_in_one_turn_apply_in_call_order() -> None:
    toolset = Toolset.build(["sokoban"], initial_state={"grid": ["######", "#PX_O#", "######"]})
    calls = [ToolCall("sokoban", {"action": "right"}), ToolCall("sokoban", {"action": "right"})]
    results = asyncio.run(toolset.call_many(calls))
    assert results[0].output == "######\n#_PXO#\n######\nreward: -0.1, done: false"
    assert results[1].output == "######\n#__P√#\n######\nreward: 10.9, done: true"
    env = toolset.environment
    assert (env.done, env.last_reward, round(env.total_reward, 6)) == (True, 10.9, 10.8)


def test_actions_after_the_episode_ends_are_errors() -> None:
    toolset = Toolset.build(["frozenlake"], initial_state={"grid": ["PG", "__"]})
    calls = [ToolCall("frozenlake", {"action": "right"}), ToolCall("frozenlake", {"action": "left"})]
    results = asyncio.run(toolset.call_many(calls))
    assert results[0].output == "_W\n__\nreward: 1, done: true"
    assert (results[1].ok, results[1].error) == (False, "the episode is over; give your final answer")


def test_invalid_action_is_rejected_by_the_schema() -> None:
    results = asyncio.run(
        Toolset.build(["frozenlake"], seed=0).call_many([ToolCall("frozenlake", {"action": "jump"})])
    )
    assert not results[0].ok
    assert "'jump' is not one of ['up', 'down', 'left', 'right']" in results[0].error
