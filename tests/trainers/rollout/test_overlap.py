"""Overlap (SkyRL): trajectories advance on their own, generation batches whoever is ready."""

from __future__ import annotations

import json

from tests.trainers.rollout.conftest import SleepTool
from trainers.config.limits import RolloutLimits
from trainers.rollout.engine import RolloutEngine


def calls_then_answer(n_calls: int, seconds: float):
    """Call the sleep tool until `n_calls` responses are in the context, then answer."""

    def respond(prompt: str) -> str:
        if prompt.count("<tool_response>") >= n_calls:
            return "\\boxed{done}<|im_end|>"
        args = {"text": "x", "seconds": seconds}
        return f"<tool_call>{json.dumps({'name': 'test_sleep', 'arguments': args})}</tool_call>"

    return respond


def test_waiting_trajectories_overlap_tool_latency_and_share_generation_batches(scripted):
    backend = scripted(calls_then_answer(2, 0.2), delay_s=0.05)
    engine = RolloutEngine(backend, "qwen_tool", ["test_sleep"], RolloutLimits())
    trajs = engine.run([{"id": str(i), "question": "q"} for i in range(8)])
    assert all(t.finish_reason == "answer" and t.num_tool_calls == 2 for t in trajs)
    # All eight wait on their tools together and each round of generation batches all eight (one
    # trajectory at a time: one call in flight, 24 batches of one). The wall-clock gain against one at a
    # time is measured by tests/benchmarks/bench_overlap.py.
    assert SleepTool.max_in_flight == 8
    assert max(backend.batch_sizes) == 8 and sum(backend.batch_sizes) == 24


def test_calls_of_one_turn_run_concurrently_in_call_order(scripted):
    seconds = {"a": 0.3, "b": 0.1, "c": 0.2}  # they finish in the order b, c, a
    calls = [{"name": "test_sleep", "arguments": {"text": t, "seconds": s}} for t, s in seconds.items()]

    def respond(prompt: str) -> str:
        if "echo a" in prompt:
            return "\\boxed{abc}<|im_end|>"
        return f"<tool_call>{json.dumps(calls)}</tool_call>"

    engine = RolloutEngine(scripted(respond), "qwen_tool", ["test_sleep"], RolloutLimits())
    traj = engine.run([{"id": "q", "question": "q"}])[0]
    assert SleepTool.max_in_flight == 3  # the turn's three calls slept at the same time
    assert [r.output for r in traj.tool_results] == ["echo a", "echo b", "echo c"]
    assert [r.latency_s >= seconds[r.output[-1]] for r in traj.tool_results] == [True] * 3


def test_max_concurrent_bounds_live_trajectories(scripted):
    backend = scripted(calls_then_answer(1, 0.0))
    engine = RolloutEngine(backend, "qwen_tool", ["test_sleep"], RolloutLimits(), max_concurrent=3)
    trajs = engine.run([{"id": str(i), "question": "q"} for i in range(7)])
    assert len(trajs) == 7 and max(backend.batch_sizes) == 3
