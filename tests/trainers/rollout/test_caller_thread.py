"""Blocking rollouts run generation in the calling thread (one OpenMP team for rollout and update)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.trainers.rollout.test_overlap import calls_then_answer
from trainers.config.limits import RolloutLimits
from trainers.rollout.caller_thread import run_with_caller_executor
from trainers.rollout.engine import RolloutEngine


def test_executor_calls_run_in_the_calling_thread_while_the_loop_runs_beside_them():
    caller = threading.get_ident()
    loop_ran = threading.Event()

    async def main(executor):
        loop = asyncio.get_running_loop()

        async def mark() -> None:
            await asyncio.sleep(0.01)
            loop_ran.set()

        marker = asyncio.create_task(mark())
        # the blocking call waits for the loop's task: it can only return if the loop is not blocked
        ident = await loop.run_in_executor(executor, lambda: loop_ran.wait(5) and threading.get_ident())
        await marker
        return ident, threading.get_ident()

    ident, loop_thread = run_with_caller_executor(main)
    assert ident == caller and loop_thread != caller


def test_errors_reach_the_awaiting_coroutine_and_the_caller():
    def boom() -> None:
        raise ValueError("model failed")

    async def main(executor):
        with pytest.raises(ValueError, match="model failed"):
            await asyncio.get_running_loop().run_in_executor(executor, boom)
        raise KeyError("after")

    with pytest.raises(KeyError, match="after"):
        run_with_caller_executor(main)


def test_engine_run_generates_in_the_calling_thread(scripted):
    backend = scripted(calls_then_answer(1, 0.05))
    threads: set[int] = set()
    generate = backend.generate

    def recording(requests):
        threads.add(threading.get_ident())
        return generate(requests)

    backend.generate = recording
    engine = RolloutEngine(backend, "qwen_tool", ["test_sleep"], RolloutLimits())
    trajectories = engine.run([{"id": str(i), "question": "q"} for i in range(4)], 2)
    assert threads == {threading.get_ident()}
    assert all(t.finish_reason == "answer" and t.num_tool_calls == 1 for t in trajectories)
