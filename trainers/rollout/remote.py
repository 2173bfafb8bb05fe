"""Rollouts as jobs on other workers: the second implementation of the engine's `run(rows, k, seed)`.

The trainer's `RemoteRollouts` publishes the policy's weights as a version in the artifact store, splits
the step's rows into jobs of whole groups and hands them to a `Dispatcher` (a process pool here, Celery's
rollout queue in the workbench). On each worker a `RolloutWorkerState` keeps the model loaded, loads a
version only when a job asks for another, and runs the job with `RolloutEngine.run`: sampling seeds
derive from (seed, group id, sample, turn), so a trajectory is the one the in-process engine samples,
however the rows were split. A job whose result does not come in time is sent again; the first result
of a job counts, later ones are dropped.
"""

from __future__ import annotations

import logging
import math
import statistics
import threading
import time
import uuid
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from trainers.config.sampling import SamplingParams
from trainers.metrics import keys
from trainers.models.device import resolve_device
from trainers.rollout.scheduler import SchedulerStats
from trainers.trajectory import Trajectory

logger = logging.getLogger(__name__)
WEIGHTS_PREFIX = "weights"  # under the dispatcher's weights URL
# transformers builds a model under a process-wide meta-device context: two threads building at once
# break each other, so pool threads of one process build one at a time
_BUILD_LOCK = threading.Lock()


@dataclass
class RolloutJob:
    """One chunk of a step's rows (whole groups) and what a worker needs to roll them out; JSON-able."""

    job_id: str
    run_key: str  # the run (and config) whose policy the worker keeps loaded
    weights_url: str  # the artifact store holding `<weights_prefix>/v{version:06d}`
    weights_prefix: str
    weight_version: int
    rows: list[dict]
    samples_per_prompt: int
    seed: int | None
    spec: dict[str, Any]  # template, prompt source, tool bindings, limits, sampling, device

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutJob:
        return cls(**data)


@dataclass
class JobResult:
    """A job's finished trajectories (as dicts, rewards not computed yet) and where they came from."""

    job_id: str
    trajectories: list[dict]
    worker: str
    weight_version: int
    seconds: float = 0.0  # the job on its worker, weight loading included
    load_s: float = 0.0  # of which loading a weight version
    generate_s: float = 0.0
    batches: int = 0
    requests: int = 0
    arrived: float = field(default=0.0, compare=False)  # the dispatcher's clock when the result came

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        return cls(**data)


class JobFailed(Exception):
    """A job raised on its worker; the dispatcher sends it again (up to its attempt limit)."""


def rollout_spec(
    template: str, prompt_source: str | None, tools: list[dict], limits: Any, sampling: SamplingParams,
    device: str = "cpu", generation: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What a worker needs besides the weights to roll out exactly as the trainer's engine would;
    `generation` (the config's section) only when it is not the HF backend."""
    spec = {
        "template": template,
        "prompt_source": prompt_source,
        "tools": [binding if isinstance(binding, str) else dict(binding) for binding in tools],
        "limits": limits.model_dump(),
        "sampling": sampling.model_dump(),
        "device": device,
    }
    if generation is not None and generation.get("backend", "hf") != "hf":
        spec["generation"] = dict(generation)
    return spec


# --- the worker side -------------------------------------------------------------------------------
@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    backend: Any
    version: int
    engines: dict[str, Any] = field(default_factory=dict)  # spec (without sampling) -> RolloutEngine
    workdir: Any = None  # a vLLM engine's model directory, kept while the engine lives


class RolloutWorkerState:
    """What a rollout worker keeps between jobs: the policy of the runs it served lately, at the version
    it last loaded, and an engine per rollout spec. A newer (or other) version is loaded in place."""

    def __init__(self, name: str = "local", *, max_runs: int = 2) -> None:
        self.name = name
        self.max_runs = max_runs  # policies kept loaded; the least recently used is dropped
        self.loaded: dict[str, _Loaded] = {}
        self.loads = 0  # weight versions loaded (the first build included)

    def run(self, job: RolloutJob) -> JobResult:
        start = time.perf_counter()
        loaded, load_s = self._policy(job)
        engine = self._engine(loaded, job.spec)
        engine.sampling = SamplingParams(**job.spec["sampling"])
        trajectories = engine.run(job.rows, job.samples_per_prompt, seed=job.seed)
        stats = engine.last_stats or SchedulerStats()
        return JobResult(
            job.job_id, [t.to_dict() for t in trajectories], self.name, loaded.version,
            seconds=time.perf_counter() - start, load_s=load_s, generate_s=stats.generate_s,
            batches=stats.batches, requests=stats.requests,
        )  # fmt: skip

    def _policy(self, job: RolloutJob) -> tuple[_Loaded, float]:
        from trainers.storage.store import ArtifactStore
        from trainers.storage.weights import load_published_policy, load_version

        start = time.perf_counter()
        store = ArtifactStore.from_url(job.weights_url)
        key = f"{job.run_key}@{job.weights_url}"  # run ids repeat across databases; their stores do not
        loaded = self.loaded.pop(key, None)
        if loaded is None:
            with _BUILD_LOCK:
                model, tokenizer = load_published_policy(store, job.weights_prefix, job.weight_version)
            loaded = _load_backend(job, store, model, tokenizer)
            self.loads += 1
        elif loaded.version != job.weight_version:
            load_version(store, job.weights_prefix, job.weight_version, loaded.model)
            loaded.version = job.weight_version
            if hasattr(loaded.backend, "policy_updated"):  # a vLLM engine takes the new weights next
                loaded.backend.policy_updated()
            self.loads += 1
        self.loaded[key] = loaded  # most recently used last
        while len(self.loaded) > self.max_runs:
            self.loaded.pop(next(iter(self.loaded)))
        return loaded, time.perf_counter() - start

    def _engine(self, loaded: _Loaded, spec: dict[str, Any]) -> Any:
        from trainers.config.limits import RolloutLimits
        from trainers.rollout.engine import RolloutEngine

        key = repr(sorted((k, repr(v)) for k, v in spec.items() if k != "sampling"))
        if key not in loaded.engines:
            loaded.engines[key] = RolloutEngine(
                loaded.backend, spec["template"], list(spec["tools"]), RolloutLimits(**spec["limits"]),
                prompt_source=spec.get("prompt_source"),
            )  # fmt: skip
        return loaded.engines[key]


def _load_backend(job: RolloutJob, store: Any, model: Any, tokenizer: Any) -> _Loaded:
    """The worker's policy and backend for a run: the HF backend over the model on the spec's device, or
    (`generation.backend: vllm`) a vLLM engine built from the job's weight version, which takes each
    later version from the model (kept on the CPU) without a restart."""
    generation = job.spec.get("generation") or {}
    if generation.get("backend", "hf") == "hf":
        from trainers.backends.hf import HFBackend

        device = job.spec.get("device", "cpu")
        model.to(resolve_device(device))
        return _Loaded(model, tokenizer, HFBackend(model, tokenizer), job.weight_version)
    import tempfile
    from pathlib import Path

    from trainers.backends.vllm import VLLMBackend, VLLMOptions, build_llm
    from trainers.storage.weights import TOKENIZER, fetch_version

    workdir = tempfile.TemporaryDirectory(prefix="vllm-policy-")
    local = fetch_version(store, job.weights_prefix, job.weight_version, Path(workdir.name) / "model")
    tokenizer_dir = store.get_dir(f"{job.weights_prefix}/{TOKENIZER}", Path(workdir.name) / TOKENIZER)
    options = VLLMOptions(**{**generation.get("vllm", {}), "sleep": False})  # nothing trains here
    with _BUILD_LOCK:
        llm = build_llm(local, options, tokenizer_path=tokenizer_dir, seed=job.seed or 0)
    backend = VLLMBackend(llm, tokenizer, policy=model, options=options, loaded=True)
    return _Loaded(model, tokenizer, backend, job.weight_version, workdir=workdir)


# --- dispatchers -----------------------------------------------------------------------------------
class Dispatcher(Protocol):
    """Runs rollout jobs somewhere and returns each job's result exactly once, in job order."""

    weights_url: str  # an artifact store every worker of this dispatcher can read
    run_key: str

    def live_workers(self) -> int: ...

    def run_jobs(self, jobs: list[RolloutJob], *, timeout_s: float) -> list[JobResult]: ...


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
        in_flight: dict[str, list[Any]] = {job.job_id: [self._send(job, 0)] for job in jobs}
        attempts = dict.fromkeys(in_flight, 1)
        since = dict.fromkeys(in_flight, time.monotonic())
        done: dict[str, JobResult] = {}
        try:
            while len(done) < len(jobs):
                for job in jobs:
                    if job.job_id not in done:
                        self._poll(job, in_flight, attempts, since, done, timeout_s)
                if len(done) < len(jobs):
                    time.sleep(self.poll_s)
        finally:
            for handles in in_flight.values():
                for handle in handles:
                    self._drop(handle)
        return [done[job.job_id] for job in jobs]

    def _poll(
        self, job: RolloutJob, in_flight: dict[str, list[Any]], attempts: dict[str, int],
        since: dict[str, float], done: dict[str, JobResult], timeout_s: float,
    ) -> None:  # fmt: skip
        handles, reason = in_flight[job.job_id], None
        for handle in list(handles):
            try:
                result = self._result(handle)
            except JobFailed as exc:
                handles.remove(handle)
                self._drop(handle)
                reason = str(exc)
                continue
            if result is not None:
                result.arrived = time.monotonic()
                done[job.job_id] = result  # the first result counts; the other sendings are dropped
                return
        if handles and time.monotonic() - since[job.job_id] <= timeout_s:
            return
        reason = reason or f"no result within {timeout_s:g} s"
        if attempts[job.job_id] >= self.max_attempts:
            raise RuntimeError(f"rollout job {job.job_id} sent {attempts[job.job_id]} times; last: {reason}")
        logger.warning("rollout job %s sent again: %s", job.job_id, reason)
        handles.append(self._send(job, attempts[job.job_id]))
        attempts[job.job_id] += 1
        since[job.job_id] = time.monotonic()
        self.resent += 1


_WORKER = threading.local()  # one RolloutWorkerState per pool thread or process


def _pool_init(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def run_job_here(job: dict[str, Any]) -> dict[str, Any]:
    """A pool's work item: the job on this thread's (or process's) own worker state."""
    state = getattr(_WORKER, "state", None)
    if state is None:
        import os

        state = _WORKER.state = RolloutWorkerState(f"pool-{os.getpid()}-{threading.get_ident()}")
    return state.run(RolloutJob.from_dict(job)).to_dict()


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


# --- the trainer side ------------------------------------------------------------------------------
@dataclass
class _Ahead:
    """A rollout started before the trainer asked for it (bounded staleness)."""

    key: tuple
    future: Future
    version: int  # the weight version its jobs sample from
    stamp: Any  # the policy's stamp when that version was published
    sent: float
    published: float  # publish time it took, 0 if the version was already out


def _key(rows: list[dict], samples_per_prompt: int, seed: int | None, sampling: SamplingParams) -> tuple:
    ids = tuple(str(row.get("id", index)) for index, row in enumerate(rows))
    return ids, samples_per_prompt, seed, sampling.model_dump_json()


def weights_stamp(model: Any) -> tuple[int, ...]:
    """Changes when a parameter is written in place by autograd-visible ops (a checkpoint's
    load_state_dict): the tensors' version counters. Fused optimiser kernels do not count, so the
    optimiser reports its steps through `RemoteRollouts.watch`."""
    return tuple(p._version for p in model.parameters())


class RemoteRollouts:
    """The trainer's rollouts on a dispatcher's workers; the same surface as `RolloutEngine` (`run`,
    `sampling`, `last_stats`), plus `last_metrics` for the step."""

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
        self.version: int | None = None
        self.publish_s = 0.0  # the last publish
        self._stamp: tuple[Any, ...] | None = None
        self._updates = 0  # optimiser steps seen through `watch`
        self.max_staleness = max_staleness  # 1: the next step's rollout runs during this step's update
        self._ahead: _Ahead | None = None
        self.last_stats: SchedulerStats | None = None
        self.last_metrics: dict[str, float] = {}

    def watch(self, optimizer: Any) -> None:
        """Count `optimizer`'s steps: each makes a new policy version, published before the next rollout."""
        optimizer.register_step_post_hook(lambda *_: self._updated())

    def _updated(self) -> None:
        self._updates += 1

    def publish(self) -> int:
        """The weight version the workers sample from: the current policy, published when it changed."""
        from trainers.storage.weights import publish_weights

        stamp = (self._updates, weights_stamp(self.model))
        if self.version is None or stamp != self._stamp:
            start = time.perf_counter()
            self.version = publish_weights(
                self.store, WEIGHTS_PREFIX, self.model, self.tokenizer, keep=self.keep_versions
            )
            self.publish_s = time.perf_counter() - start
            self._stamp = stamp
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
        self._ahead = _Ahead(key, future, self.version or 0, self._stamp, sent, published)

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
            stale = 1.0 if (self._updates, weights_stamp(self.model)) != ahead.stamp else 0.0
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
