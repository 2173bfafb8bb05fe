"""The vLLM adapter inside a rollout worker (over the API double): the worker builds its engine from the
job's published weight version and takes each newer version into the running engine, sampling what the
HF backend samples from the same weights."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.backends.vllm_double import Api
from trainers.backends import vllm as vllm_backend
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.models.model_io import load_policy
from trainers.rollout.remote.client import RemoteRollouts
from trainers.rollout.remote.dispatch import PoolDispatcher
from trainers.rollout.remote.wire import rollout_spec
from trainers.rollout.remote.worker import RolloutWorkerState

ROWS = [{"id": "a", "question": "What is 2 + 3?"}, {"id": "b", "question": "What is 7 * 6?"}]
LIMITS = RolloutLimits(max_turns=2, max_new_tokens_per_turn=6, max_total_new_tokens=12)


def token_ids(results) -> list[list[list[int]]]:
    return [[turn["token_ids"] for turn in t["turns"]] for r in results for t in r.trajectories]


@pytest.mark.slow
def test_a_rollout_worker_samples_with_vllm_and_loads_new_versions_in_place(
    tiny_model_dir, tmp_path, monkeypatch
):
    torch.set_num_threads(1)
    monkeypatch.setattr(vllm_backend, "vllm_api", lambda: Api)
    model, tokenizer = load_policy(tiny_model_dir)
    dispatcher = PoolDispatcher(str(tmp_path / "store"), workers=1)
    greedy = SamplingParams(temperature=0.0)
    specs = {
        name: rollout_spec("qwen_tool", None, [{"name": "calculator"}], LIMITS, greedy, generation=generation)
        for name, generation in (("hf", None), ("vllm", {"backend": "vllm", "vllm": {"sleep": True}}))
    }
    assert "generation" not in specs["hf"] and specs["vllm"]["generation"]["backend"] == "vllm"
    rollouts = {name: RemoteRollouts(model, tokenizer, dispatcher, spec) for name, spec in specs.items()}
    workers = {name: RolloutWorkerState(name) for name in specs}
    try:
        first = {name: [workers[name].run(j) for j in rollouts[name].jobs(ROWS, 2, seed=1)] for name in specs}
        backend = next(iter(workers["vllm"].loaded.values())).backend
        assert isinstance(backend, vllm_backend.VLLMBackend)
        assert backend.weight_loads == 0  # built from the job's version: nothing to load yet
        assert not backend.options.sleep  # nothing trains on a rollout worker
        assert token_ids(first["vllm"]) == token_ids(first["hf"])
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
        for remote in rollouts.values():
            remote.policy_changed(1)
        newer = {name: [workers[name].run(j) for j in rollouts[name].jobs(ROWS, 2, seed=1)] for name in specs}
    finally:
        dispatcher.close()
    # (both pipelines publish to the dispatcher's one store: versions count for them together)
    assert {r.weight_version for r in newer["vllm"]} != {r.weight_version for r in first["vllm"]}
    assert backend.weight_loads == 1  # version 2 went into the running engine
    assert token_ids(newer["vllm"]) == token_ids(newer["hf"])
    assert token_ids(newer["vllm"]) != token_ids(first["vllm"])
    for a, b in zip(newer["vllm"], newer["hf"], strict=True):
        for ta, tb in zip(a.trajectories, b.trajectories, strict=True):
            for x, y in zip(ta["turns"], tb["turns"], strict=True):
                if y["logprobs"] is not None:
                    assert x["logprobs"] == pytest.approx(y["logprobs"], rel=1e-4, abs=1e-4)
