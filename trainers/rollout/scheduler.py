"""Generation scheduling for overlapped rollouts (SkyRL-v0, verl async): batch whoever is ready.

Each trajectory is an asyncio task. When it needs tokens it queues a request and awaits it; the
scheduler sends everything queued as one batch to the backend in a worker thread, so tool calls of
other trajectories run meanwhile, and whatever queued during that batch goes in the next one.
Before launching a batch it lets the queue settle (20 ms without arrivals) unless every live
trajectory is already waiting: tool calls that end together then share one batch instead of
splitting into a small batch and a second one that waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import Executor
from dataclasses import dataclass

from trainers.backends.base import GenerationBackend, GenerationOutput, GenerationRequest


@dataclass
class SchedulerStats:
    batches: int = 0
    requests: int = 0
    generate_s: float = 0.0


class GenerationScheduler:
    """Use as `async with GenerationScheduler(backend) as s: out = await s.generate(request)`."""

    def __init__(
        self,
        backend: GenerationBackend,
        *,
        settle_s: float = 0.02,
        max_wait_s: float = 0.1,
        executor: Executor | None = None,
    ) -> None:
        self.backend = backend
        self.executor = executor  # where batches run; None = asyncio's default thread pool
        self.settle_s = settle_s  # launch once no request arrived for this long...
        self.max_wait_s = max_wait_s  # ...or after this long in any case
        self.live = 0  # trajectories that may still ask for tokens
        self.stats = SchedulerStats()
        self._waiting: list[tuple[GenerationRequest, asyncio.Future[GenerationOutput]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def generate(self, request: GenerationRequest) -> GenerationOutput:
        future: asyncio.Future[GenerationOutput] = asyncio.get_running_loop().create_future()
        self._waiting.append((request, future))
        self._wake.set()
        return await future

    def joined(self) -> None:
        self.live += 1

    def left(self) -> None:
        self.live -= 1
        self._wake.set()  # the batch may now be complete

    async def __aenter__(self) -> GenerationScheduler:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # let trajectories woken by the last batch queue their next turn
            await self._settle()
            batch, self._waiting = self._waiting, []
            if batch:
                await self._run(batch)

    async def _settle(self) -> None:
        """Wait while requests are still arriving, unless every live trajectory is already queued.

        Each arrival (or a trajectory leaving) wakes this at once, so a complete batch launches
        without delay; `settle_s` without arrivals, or `max_wait_s` in all, launches a partial one.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_s
        while self._waiting and len(self._waiting) < self.live:
            self._wake.clear()
            timeout = min(self.settle_s, deadline - loop.time())
            if timeout <= 0:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                break

    async def _run(self, batch: list[tuple[GenerationRequest, asyncio.Future[GenerationOutput]]]) -> None:
        requests = [request for request, _ in batch]
        start = time.perf_counter()
        try:
            loop = asyncio.get_running_loop()
            outputs = await loop.run_in_executor(self.executor, self.backend.generate, requests)
        except Exception as exc:  # the trajectories waiting on this batch fail, the others go on
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            self.stats.batches += 1
            self.stats.requests += len(batch)
            self.stats.generate_s += time.perf_counter() - start
        for (_, future), output in zip(batch, outputs, strict=True):
            if not future.done():
                future.set_result(output)
