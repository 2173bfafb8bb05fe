"""The worker side of remote rollouts: a process keeps the policies of the runs it served lately loaded
and runs each job with the in-process engine."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from trainers.config.sampling import SamplingParams
from trainers.models.device import resolve_device
from trainers.rollout.remote.wire import JobResult, RolloutJob
from trainers.rollout.scheduler import SchedulerStats

# transformers builds a model under a process-wide meta-device context: two threads building at once
# break each other, so pool threads of one process build one at a time
_BUILD_LOCK = threading.Lock()


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
        with engine.generating():
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
            loaded.backend.policy_changed()  # a vLLM engine takes the new weights as it wakes
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


_WORKER = threading.local()  # one RolloutWorkerState per pool thread or process


def run_job_here(job: dict[str, Any]) -> dict[str, Any]:
    """A pool's work item: the job on this thread's (or process's) own worker state."""
    state = getattr(_WORKER, "state", None)
    if state is None:
        import os

        state = _WORKER.state = RolloutWorkerState(f"pool-{os.getpid()}-{threading.get_ident()}")
    return state.run(RolloutJob.from_dict(job)).to_dict()
