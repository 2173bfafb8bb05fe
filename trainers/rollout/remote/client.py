"""The trainer side of remote rollouts: `RemoteRollouts` publishes the policy's weights as versions and
runs each step's rows as jobs on a dispatcher's workers."""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from trainers.config.sampling import SamplingParams
from trainers.metrics import keys
from trainers.rollout.remote.dispatch import Dispatcher
from trainers.rollout.remote.wire import WEIGHTS_PREFIX, JobResult, RolloutJob
from trainers.rollout.scheduler import SchedulerStats
from trainers.trajectory import Trajectory


@dataclass
class _Ahead:
    """A rollout started before the trainer asked for it (bounded staleness)."""

    key: tuple
    future: Future
    version: int  # the weight version its jobs sample from
    policy_version: int  # the trainer's policy version published as that weight version
    sent: float
    published: float  # publish time it took, 0 if the version was already out


def _key(rows: list[dict], samples_per_prompt: int, seed: int | None, sampling: SamplingParams) -> tuple:
    ids = tuple(str(row.get("id", index)) for index, row in enumerate(rows))
    return ids, samples_per_prompt, seed, sampling.model_dump_json()


class RemoteRollouts:
    """The trainer's `Rollouts` on a dispatcher's workers; `last_metrics` reports the step's jobs, workers
    and weight version."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        dispatcher: Dispatcher,
        spec: dict[str, Any],
        *,
        prompts_per_job: int | None = None,
        jobs_per_worker: int = 1,
        job_timeout_s: float = 300.0,
        keep_versions: int = 2,
        max_staleness: int = 0,
    ) -> None:
        from trainers.storage.store import ArtifactStore

        self.model, self.tokenizer, self.dispatcher = model, tokenizer, dispatcher
        self.spec = {k: v for k, v in spec.items() if k != "sampling"}
        self.sampling = SamplingParams(**spec["sampling"])  # the trainer swaps it for greedy rollouts
        self.prompts_per_job, self.jobs_per_worker = prompts_per_job, jobs_per_worker
        self.job_timeout_s = job_timeout_s
        self.keep_versions = keep_versions
        self.store = ArtifactStore.from_url(dispatcher.weights_url)
        self.version: int | None = None  # the weight version last published
        self.publish_s = 0.0  # the last publish
        self.policy_version = 0  # the trainer's, from `policy_changed`
        self._published_policy = 0  # the policy version published as `version`
        self.max_staleness = max_staleness  # 1: the next step's rollout runs during this step's update
        self._ahead: _Ahead | None = None
        self.last_stats: SchedulerStats | None = None
        self.last_metrics: dict[str, float] = {}

    def policy_changed(self, version: int) -> None:
        """The trainer changed the policy: the next jobs sample it, published as a new weight version."""
        self.policy_version = version

    def generating(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to wake in the trainer's process: the workers generate."""
        return contextlib.nullcontext()

    def publish(self) -> int:
        """The weight version the workers sample from: the current policy, published when it changed."""
        from trainers.storage.weights import publish_weights

        if self.version is None or self._published_policy != self.policy_version:
            start = time.perf_counter()
            self.version = publish_weights(
                self.store, WEIGHTS_PREFIX, self.model, self.tokenizer, keep=self.keep_versions
            )
            self.publish_s = time.perf_counter() - start
            self._published_policy = self.policy_version
        return self.version

    def jobs(self, rows: list[dict], samples_per_prompt: int, seed: int | None) -> list[RolloutJob]:
        """Whole groups per job (`prompts_per_job`, else `jobs_per_worker` jobs per live worker); a row keeps
        the id the in-process engine would give it (its index)."""
        rows = [{**row, "id": row.get("id", index)} for index, row in enumerate(rows)]
        version, step_id = self.publish(), uuid.uuid4().hex[:12]
        spec = {**self.spec, "sampling": self.sampling.model_dump()}
        jobs = max(1, self.dispatcher.live_workers() * self.jobs_per_worker)
        n = self.prompts_per_job or math.ceil(len(rows) / jobs)
        where = (self.dispatcher.run_key, self.dispatcher.weights_url, WEIGHTS_PREFIX)
        chunks = [rows[i : i + n] for i in range(0, len(rows), n)]
        return [
            RolloutJob(f"{step_id}-{c}", *where, version, chunk, samples_per_prompt, seed, spec)
            for c, chunk in enumerate(chunks)
        ]

    def prefetch(self, rows: list[dict], samples_per_prompt: int, seed: int | None) -> None:
        """Bounded staleness (`max_staleness` 1): start the rollout the trainer will ask for next, on the
        weights as they are now, in a thread of its own; `run` with the same arguments takes its result."""
        if not self.max_staleness:
            return
        key = _key(rows, samples_per_prompt, seed, self.sampling)
        publish_before = self.publish_s
        jobs = self.jobs(rows, samples_per_prompt, seed)
        published = self.publish_s if self.publish_s != publish_before else 0.0
        future: Future[list[JobResult]] = Future()

        def gather() -> None:
            try:
                future.set_result(self.dispatcher.run_jobs(jobs, timeout_s=self.job_timeout_s))
            except BaseException as exc:  # raised in the trainer's thread by `run`
                future.set_exception(exc)

        sent = time.monotonic()
        threading.Thread(target=gather, name="rollout-prefetch", daemon=True).start()
        self._ahead = _Ahead(key, future, self.version or 0, self._published_policy, sent, published)

    def run(
        self, rows: list[dict], samples_per_prompt: int = 1, *, seed: int | None = None
    ) -> list[Trajectory]:
        """All samples of all rows, ordered by row then sample index, as `RolloutEngine.run` returns them."""
        ahead = self._ahead
        if ahead is not None and ahead.key == _key(rows, samples_per_prompt, seed, self.sampling):
            self._ahead = None
            results, version, sent, published = (
                ahead.future.result(),
                ahead.version,
                ahead.sent,
                ahead.published,
            )
            stale = 1.0 if self.policy_version != ahead.policy_version else 0.0
        else:
            publish_before = self.publish_s
            jobs = self.jobs(rows, samples_per_prompt, seed)
            published = self.publish_s if self.publish_s != publish_before else 0.0
            sent, version, stale = time.monotonic(), self.version or 0, 0.0
            results = self.dispatcher.run_jobs(jobs, timeout_s=self.job_timeout_s)
        trajectories = [Trajectory.from_dict(d) for r in results for d in r.trajectories]
        if len(trajectories) != len(rows) * samples_per_prompt or len({t.uid for t in trajectories}) != len(
            trajectories
        ):
            raise RuntimeError("rollout jobs returned a different set of trajectories than the step's rows")
        self.last_stats = SchedulerStats(
            batches=sum(r.batches for r in results), requests=sum(r.requests for r in results),
            generate_s=sum(r.generate_s for r in results),
        )  # fmt: skip
        self.last_metrics = self._metrics(results, sent, published)
        self.last_metrics[keys.ROLLOUT_WEIGHT_VERSION] = float(version)
        self.last_metrics[keys.ROLLOUT_STALENESS] = stale
        return trajectories

    def _metrics(self, results: list[JobResult], sent: float, published: float) -> dict[str, float]:
        """Straggler time: once the queue ran dry each worker holds its last job; how long the step waited
        after the first of those last jobs finished (0 when jobs finished together)."""
        workers = {r.worker for r in results}
        arrivals = sorted(r.arrived for r in results)
        tail = arrivals[max(0, len(arrivals) - len(workers))] if arrivals else sent
        return {
            keys.ROLLOUT_CHUNKS: float(len(results)),
            keys.ROLLOUT_WORKERS: float(len(workers)),
            keys.ROLLOUT_STRAGGLER_S: (arrivals[-1] - tail) if arrivals else 0.0,
            keys.ROLLOUT_RESENT: float(getattr(self.dispatcher, "resent", 0)),
            keys.ROLLOUT_PUBLISH_S: published,
            keys.ROLLOUT_JOB_S_MEDIAN: statistics.median(r.seconds for r in results) if results else 0.0,
            keys.ROLLOUT_DISPATCH_S: max(0.0, (arrivals[-1] if arrivals else sent) - sent),
        }
