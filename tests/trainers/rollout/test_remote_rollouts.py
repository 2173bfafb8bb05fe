"""Rollouts as jobs on rollout workers (here a pool of threads, each with its own loaded policy, reading
weights through a local artifact store): the same trajectories as the in-process engine, weight versions
published once per policy, and every job's result counted once when a worker loses or fails a job."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest
import torch

from trainers.backends.hf import HFBackend
from trainers.config.loader import ConfigError, validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.metrics import keys
from trainers.models.model_io import load_policy
from trainers.models.tiny import build_tiny_model
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.remote.client import RemoteRollouts
from trainers.rollout.remote.dispatch import PoolDispatcher
from trainers.rollout.remote.wire import rollout_spec
from trainers.rollout.remote.worker import RolloutWorkerState, run_job_here
from trainers.storage.store import ArtifactStore
from trainers.storage.weights import (
    load_published_policy,
    load_version,
    publish_weights,
    published_versions,
)
from trainers.training.build import build_trainer
from trainers.training.sinks import read_jsonl


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(
        tmp_path_factory.mktemp("tiny"), hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1
    )


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    train, _ = make_splits(16, 0, seed=0)
    return write_rows(train, tmp_path_factory.mktemp("data") / "train.jsonl")


def run_config(model_dir, train_file, out, steps=2, engine="local", **rollout):
    return validate_config({
        "seed": 5,
        "output_dir": str(out),
        "model": {"path": str(model_dir)},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 2, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 16},
        "rollout": {"prompts_per_step": 3, "samples_per_prompt": 2, **rollout},
        "reward": {"components": [{"name": "format"}]},
        "optimizer": {"lr": 1e-2},
        "training": {"steps": steps, "engine": engine},
        "checkpoint": {"every_steps": 10},
        "evaluation": {"greedy": False},
        "data": {"train_path": str(train_file)},
    })  # fmt: skip


def assert_same_trajectories(remote: list[dict], local: list[dict]) -> None:
    """Token ids exactly; log-probs to a relative 1e-5: a row's seed fixes its samples whatever the batch,
    but a CPU matmul over a batch of another size may round the last bits of a logit differently."""
    assert [t["uid"] for t in remote] == [t["uid"] for t in local]
    for a, b in zip(remote, local, strict=True):
        assert [turn["token_ids"] for turn in a["turns"]] == [turn["token_ids"] for turn in b["turns"]]
        for ta, tb in zip(a["turns"], b["turns"], strict=True):
            if tb["logprobs"] is None:  # prompt, tool and glue turns were not sampled
                assert ta["logprobs"] is None
            else:
                assert ta["logprobs"] == pytest.approx(tb["logprobs"], rel=1e-5, abs=1e-6)
        assert a["reward"] == pytest.approx(b["reward"], rel=1e-9)


def test_remote_rollouts_sample_the_in_process_trajectories(model_dir, train_file, tmp_path):
    torch.set_num_threads(1)
    local = build_trainer(run_config(model_dir, train_file, tmp_path / "local"))
    local.train()
    dispatcher = PoolDispatcher(str(tmp_path / "store"), workers=2)
    try:
        remote = build_trainer(run_config(model_dir, train_file, tmp_path / "remote", backend="remote"),
                               dispatcher=dispatcher)  # fmt: skip
        assert isinstance(remote.rollouts, RemoteRollouts)
        remote.train()
    finally:
        dispatcher.close()
    got = read_jsonl(tmp_path / "remote" / "trajectories.jsonl")
    want = read_jsonl(tmp_path / "local" / "trajectories.jsonl")
    assert len(got) == 2 * 3 * 2 and any(len(t["turns"]) > 2 for t in want)  # multi-turn: a call answered
    assert_same_trajectories(got, want)
    metrics = read_jsonl(tmp_path / "remote" / "metrics.jsonl")
    # a job per worker (2 prompts and 1); the policy changed after step 1, so step 2 has a new version
    assert [m[keys.ROLLOUT_CHUNKS] for m in metrics] == [2.0, 2.0]
    assert [m[keys.ROLLOUT_WEIGHT_VERSION] for m in metrics] == [1.0, 2.0]
    assert all(m[keys.ROLLOUT_STRAGGLER_S] >= 0.0 and m[keys.ROLLOUT_RESENT] == 0.0 for m in metrics)


def test_python_m_trainers_rolls_out_in_process_without_rollout_workers(model_dir, train_file, tmp_path):
    trainer = build_trainer(run_config(model_dir, train_file, tmp_path, backend="remote"))
    assert not isinstance(trainer.rollouts, RemoteRollouts)


def test_remote_rollouts_with_the_deepspeed_engine_is_a_config_error_naming_both_fields(
    model_dir, train_file, tmp_path
):
    with pytest.raises(ConfigError) as info:
        run_config(model_dir, train_file, tmp_path, backend="remote", engine="deepspeed")
    assert "rollout.backend" in str(info.value) and "training.engine" in str(info.value)


def test_weight_versions_publish_load_in_place_and_keep_the_newest(model_dir, tmp_path):
    store = ArtifactStore.from_url(str(tmp_path / "store"))
    model, tokenizer = load_policy(model_dir)
    assert publish_weights(store, "weights", model, tokenizer, keep=2) == 1
    worker, _ = load_published_policy(store, "weights", 1)
    tensors = {name: p.data_ptr() for name, p in worker.named_parameters()}
    for version in (2, 3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * version)
        assert publish_weights(store, "weights", model, tokenizer, keep=2) == version
    assert published_versions(store, "weights") == [2, 3]  # version 1 collected
    load_version(store, "weights", 3, worker)
    for (name, p), q in zip(worker.named_parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q), name
        assert p.data_ptr() == tensors[name]  # loaded into the same tensors
    # tied embeddings stay tied after a load
    assert worker.get_output_embeddings().weight.data_ptr() == worker.get_input_embeddings().weight.data_ptr()


def test_a_worker_loads_a_version_only_when_a_job_asks_for_another(model_dir, train_file, tmp_path):
    model, tokenizer = load_policy(model_dir)
    dispatcher = PoolDispatcher(str(tmp_path / "store"), workers=1)
    state = RolloutWorkerState("w")
    config = run_config(model_dir, train_file, tmp_path)
    rollouts = RemoteRollouts(
        model, tokenizer, dispatcher,
        rollout_spec("qwen_tool", None, [{"name": "calculator"}], config.limits, config.sampling),
    )  # fmt: skip
    rows = [{"id": "a", "question": "What is 2 + 3?"}, {"id": "b", "question": "What is 7 * 6?"}]
    first = [state.run(job) for job in rollouts.jobs(rows, 2, seed=1)]
    again = [state.run(job) for job in rollouts.jobs(rows, 2, seed=1)]
    assert state.loads == 1 and {r.weight_version for r in first + again} == {1}
    assert [r.trajectories for r in first] == [r.trajectories for r in again]
    with torch.no_grad():
        next(model.parameters()).mul_(1.5)
    rollouts.policy_changed(1)
    newer = [state.run(job) for job in rollouts.jobs(rows, 2, seed=1)]
    assert state.loads == 2 and {r.weight_version for r in newer} == {2}
    dispatcher.close()


class LosingDispatcher(PoolDispatcher):
    """A pool whose first sending of job 0 never answers (its worker died) and whose first sending of job 1
    fails; every other sending runs, and job 2 is sent twice from the start (a broker's redelivery)."""

    def _send(self, job, attempt):
        index = int(job.job_id.rsplit("-", 1)[1])
        if attempt == 0 and index == 0:
            return Future()  # never resolves
        if attempt == 0 and index == 1:
            failed: Future = Future()
            failed.set_exception(RuntimeError("worker lost"))
            return failed
        return super()._send(job, attempt)

    def run_jobs(self, jobs, *, timeout_s):
        original = self._send

        def twice(job, attempt):
            handle = original(job, attempt)
            if job.job_id.endswith("-2") and attempt == 0:
                self.duplicates.append(original(job, attempt))
            return handle

        self.duplicates: list[Future] = []
        self._send = twice
        try:
            return super().run_jobs(jobs, timeout_s=timeout_s)
        finally:
            del self._send


def test_lost_and_failed_jobs_are_sent_again_and_each_counts_once(model_dir, tmp_path):
    model, tokenizer = load_policy(model_dir)
    config = validate_config({"limits": {"max_turns": 1, "max_new_tokens_per_turn": 4}})
    spec = {"template": "qwen_tool", "prompt_source": None, "tools": [], "limits": config.limits.model_dump(),
            "sampling": config.sampling.model_dump(), "device": "cpu"}  # fmt: skip
    dispatcher = LosingDispatcher(str(tmp_path / "store"), workers=2)
    rollouts = RemoteRollouts(model, tokenizer, dispatcher, spec, job_timeout_s=1.0)
    rows = [{"id": f"r{i}", "question": f"What is {i} + 1?"} for i in range(4)]
    try:
        trajectories = rollouts.run(rows, 2, seed=7)
    finally:
        dispatcher.close()
    assert [t.uid for t in trajectories] == [f"r{i}/{k}" for i in range(4) for k in range(2)]
    assert rollouts.last_metrics[keys.ROLLOUT_RESENT] == 2.0  # job 0 after its timeout, job 1 at once
    alone = RolloutWorkerState("check")
    expected = [t for job in rollouts.jobs(rows, 2, seed=7) for t in alone.run(job).trajectories]
    assert [t.to_dict()["turns"][1]["token_ids"] for t in trajectories] == [
        t["turns"][1]["token_ids"] for t in expected
    ]


class OneSlowWorker(PoolDispatcher):
    """Two pool threads; the first one created takes a second longer over each of its jobs."""

    def _send(self, job, attempt):
        return self.pool.submit(slow_on_first_thread, job.to_dict())


SLOW_JOBS: list[str] = []


def slow_on_first_thread(job: dict) -> dict:
    result = run_job_here(job)
    if threading.current_thread().name.endswith("_0"):
        SLOW_JOBS.append(job["job_id"])
        time.sleep(1.0)
    return result


def test_small_jobs_go_to_the_faster_worker_and_the_straggler_wait_is_reported(model_dir, tmp_path):
    model, tokenizer = load_policy(model_dir)
    config = validate_config({"limits": {"max_turns": 1, "max_new_tokens_per_turn": 4}})
    spec = rollout_spec("qwen_tool", None, [], config.limits, config.sampling)
    dispatcher = OneSlowWorker(str(tmp_path / "store"), workers=2)
    rollouts = RemoteRollouts(model, tokenizer, dispatcher, spec, jobs_per_worker=4)
    rows = [{"id": f"r{i}", "question": f"What is {i} + 1?"} for i in range(8)]
    SLOW_JOBS.clear()
    try:
        rollouts.run(rows, 1, seed=3)
    finally:
        dispatcher.close()
    metrics = rollouts.last_metrics
    assert metrics[keys.ROLLOUT_CHUNKS] == 8.0 and metrics[keys.ROLLOUT_WORKERS] == 2.0
    # the slow worker held fewer jobs than the fast one; the step waited on its last one, and says how long
    assert 1 <= len(SLOW_JOBS) < 4
    assert metrics[keys.ROLLOUT_STRAGGLER_S] > 0.0
    assert metrics[keys.ROLLOUT_STRAGGLER_S] < metrics[keys.ROLLOUT_DISPATCH_S]


def test_one_step_stale_rollouts_run_during_the_update_on_the_weights_before_it(
    model_dir, train_file, tmp_path
):
    """max_staleness 1: step t+1's rollout is sent before step t's update and samples version t's weights
    (step 1 and 2 both from the initial policy); the steps still see the prompts the sampler draws."""
    torch.set_num_threads(1)
    local = build_trainer(run_config(model_dir, train_file, tmp_path / "local", steps=3))
    config = run_config(model_dir, train_file, tmp_path / "stale", steps=3, backend="remote", max_staleness=1)
    dispatcher = PoolDispatcher(str(tmp_path / "store"), workers=2)
    try:
        trainer = build_trainer(config, dispatcher=dispatcher)
        trainer.train()
    finally:
        dispatcher.close()
    metrics = read_jsonl(tmp_path / "stale" / "metrics.jsonl")
    assert [m[keys.ROLLOUT_STALENESS] for m in metrics] == [0.0, 1.0, 1.0]
    assert [m[keys.ROLLOUT_WEIGHT_VERSION] for m in metrics] == [1.0, 1.0, 2.0]
    got = read_jsonl(tmp_path / "stale" / "trajectories.jsonl")
    # the same prompts as the on-policy run, step by step; step 2 sampled by the initial policy
    local.train()
    want = read_jsonl(tmp_path / "local" / "trajectories.jsonl")
    assert [t["uid"] for t in got] == [t["uid"] for t in want]
    assert_same_trajectories([t for t in got if t["step"] == 1], [t for t in want if t["step"] == 1])
    rows = {row["id"]: row for row in read_jsonl(train_file)}
    step2 = [t for t in got if t["step"] == 2]
    groups = list(dict.fromkeys(t["group_id"] for t in step2))
    initial, tokenizer = load_policy(model_dir)
    engine = RolloutEngine(
        HFBackend(initial, tokenizer), "qwen_tool", [{"name": "calculator"}], config.limits
    )
    again = engine.run(
        [{**rows[g.split(":", 1)[1]], "id": g} for g in groups], 2, seed=config.seed * 1_000_003 + 2 * 101
    )
    assert [[turn.token_ids for turn in t.turns] for t in again] == [
        [turn["token_ids"] for turn in t["turns"]] for t in step2
    ]
