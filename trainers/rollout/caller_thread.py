"""Run a coroutine's blocking model calls in the thread that asked for the result.

PyTorch's CPU kernels use an OpenMP thread team per calling thread. When the trainer updates the
policy on one thread and the rollout generates on another, the two teams fight over the same cores
(measured here: generation twice as slow from a worker thread as from the thread that trains). So the
blocking `RolloutEngine.run` turns the usual arrangement around: the event loop (tool calls, parsing)
runs in a helper thread and every generation batch comes back to the calling thread.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")
_STOP = object()


class CallerThreadExecutor(Executor):
    """An executor whose work items run in whichever thread calls `serve` (one at a time, in order)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def serve(self) -> None:
        """Run submitted calls until `stop`; each call's outcome goes to its future."""
        while (job := self._jobs.get()) is not _STOP:
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

    def stop(self) -> None:
        self._jobs.put(_STOP)


def run_with_caller_executor(make_coroutine: Callable[[Executor], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run` the coroutine in a helper thread while this thread serves its executor calls."""
    executor = CallerThreadExecutor()
    outcome: dict[str, Any] = {}

    def loop_thread() -> None:
        try:
            outcome["result"] = asyncio.run(make_coroutine(executor))
        except BaseException as exc:  # re-raised in the calling thread
            outcome["error"] = exc
        finally:
            executor.stop()

    thread = threading.Thread(target=loop_thread, name="rollout-event-loop", daemon=True)
    thread.start()
    executor.serve()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
