"""Overlap (SkyRL): trajectories advance on their own, generation batches whoever is ready."""

from __future__ import annotations

import json
import time

from trainers.rollout.engine import RolloutEngine
from trainers.rollout.limits import RolloutLimits


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
    start = time.perf_counter()
    trajs = engine.run([{"id": str(i), "question": "q"} for i in range(8)])
    wall = time.perf_counter() - start
    # one at a time: 8 x (3 batches x 0.05 s + 2 x 0.2 s) = 4.4 s; overlapped: about 0.55 s
    assert wall < 1.5
    assert all(t.finish_reason == "answer" and t.num_tool_calls == 2 for t in trajs)
    assert max(backend.batch_sizes) == 8 and sum(backend.batch_sizes) == 24


def test_calls_of_one_turn_run_concurrently_in_call_order(scripted):
    calls = [{"name": "test_sleep", "arguments": {"text": t, "seconds": 0.3}} for t in "abc"]

    def respond(prompt: str) -> str:
        if "echo a" in prompt:
            return "\\boxed{abc}<|im_end|>"
        return f"<tool_call>{json.dumps(calls)}</tool_call>"

    engine = RolloutEngine(scripted(respond), "qwen_tool", ["test_sleep"], RolloutLimits())
    start = time.perf_counter()
    traj = engine.run([{"id": "q", "question": "q"}])[0]
    assert time.perf_counter() - start < 0.75  # sequential calls would take 0.9 s
    assert [r.output for r in traj.tool_results] == ["echo a", "echo b", "echo c"]
    assert all(r.latency_s >= 0.3 for r in traj.tool_results)


def test_max_concurrent_bounds_live_trajectories(scripted):
    backend = scripted(calls_then_answer(1, 0.0))
    engine = RolloutEngine(backend, "qwen_tool", ["test_sleep"], RolloutLimits(), max_concurrent=3)
    trajs = engine.run([{"id": str(i), "question": "q"} for i in range(7)])
    assert len(trajs) == 7 and max(backend.batch_sizes) == 3
