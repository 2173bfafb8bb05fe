"""Dispatchers: where rollout jobs run. `ResubmittingDispatcher` sends each job again when its worker
failed or lost it, counting the first result of each job once; `PoolDispatcher` is a local pool."""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainers.rollout.remote.wire import JobFailed, JobResult, RolloutJob
from trainers.rollout.remote.worker import run_job_here

logger = logging.getLogger(__name__)


class Dispatcher(Protocol):
    """Runs rollout jobs somewhere and returns each job's result exactly once, in job order."""

    weights_url: str  # an artifact store every worker of this dispatcher can read
    run_key: str

    def live_workers(self) -> int: ...

    def run_jobs(self, jobs: list[RolloutJob], *, timeout_s: float) -> list[JobResult]: ...


@dataclass
class _Sendings:
    """One job's sendings: the handles still out, how many times it was sent and when last, its result."""

    job: RolloutJob
    handles: list[Any]
    attempts: int = 1
    since: float = field(default_factory=time.monotonic)
    result: JobResult | None = None


class ResubmittingDispatcher:
    """Sends every job, polls for results, and sends a job again when its worker failed it or no result
    came within `timeout_s` of the last sending (a dead or stuck worker). The first result of each job id
    is kept and any later one dropped, so a redelivered job never counts twice."""

    poll_s = 0.01
    max_attempts = 5

    def _send(self, job: RolloutJob, attempt: int) -> Any:
        raise NotImplementedError

    def _result(self, handle: Any) -> JobResult | None:
        """The result if it came; None while running; raises JobFailed when the job failed."""
        raise NotImplementedError

    def _drop(self, handle: Any) -> None:
        """Forget a handle whose result is no longer needed."""

    def run_jobs(self, jobs: list[RolloutJob], *, timeout_s: float) -> list[JobResult]:
        self.resent = 0
        sendings = [_Sendings(job, [self._send(job, 0)]) for job in jobs]
        try:
            while pending := [s for s in sendings if s.result is None]:
                for s in pending:
                    self._poll(s, timeout_s)
                if any(s.result is None for s in pending):
                    time.sleep(self.poll_s)
        finally:
            for s in sendings:
                for handle in s.handles:
                    self._drop(handle)
        return [s.result for s in sendings if s.result is not None]

    def _poll(self, sendings: _Sendings, timeout_s: float) -> None:
        """Take the job's first result if one came, else send it again when it failed or timed out."""
        reason = None
        for handle in list(sendings.handles):
            try:
                result = self._result(handle)
            except JobFailed as exc:
                sendings.handles.remove(handle)
                self._drop(handle)
                reason = str(exc)
                continue
            if result is not None:
                result.arrived = time.monotonic()
                sendings.result = result  # the first result counts; the other sendings are dropped
                return
        if sendings.handles and time.monotonic() - sendings.since <= timeout_s:
            return
        self._resend(sendings, reason or f"no result within {timeout_s:g} s")

    def _resend(self, sendings: _Sendings, reason: str) -> None:
        job = sendings.job
        if sendings.attempts >= self.max_attempts:
            raise RuntimeError(f"rollout job {job.job_id} sent {sendings.attempts} times; last: {reason}")
        logger.warning("rollout job %s sent again: %s", job.job_id, reason)
        sendings.handles.append(self._send(job, sendings.attempts))
        sendings.attempts += 1
        sendings.since = time.monotonic()
        self.resent += 1


def _pool_init(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


class PoolDispatcher(ResubmittingDispatcher):
    """Rollout workers as a local pool: threads (tests) or spawned processes (one machine's cores), each
    with its own loaded policy. Weights go through a local artifact store like on separate machines."""

    def __init__(
        self, weights_url: str, *, run_key: str | None = None, workers: int = 2, processes: bool = False,
        threads_per_worker: int | None = None,
    ) -> None:  # fmt: skip
        self.weights_url = weights_url
        self.run_key = run_key or uuid.uuid4().hex[:12]
        self.workers = workers
        if processes:
            import multiprocessing

            self.pool: Executor = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=_pool_init,
                initargs=(threads_per_worker,),
            )  # fmt: skip
        else:
            self.pool = ThreadPoolExecutor(workers, thread_name_prefix="rollout-worker")

    def live_workers(self) -> int:
        return self.workers

    def _send(self, job: RolloutJob, attempt: int) -> Future:
        return self.pool.submit(run_job_here, job.to_dict())

    def _result(self, handle: Future) -> JobResult | None:
        if not handle.done():
            return None
        if handle.exception() is not None:
            raise JobFailed(repr(handle.exception()))
        return JobResult.from_dict(handle.result())

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
