"""Weight sync is explicit: after each update the trainer tells its rollouts the policy changed, and
generation runs inside `rollouts.generating()`. A run on the vLLM adapter (over the API double) shows the
engine taking the weights after every update, and the frozen KL reference never touching the engine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from tests.trainers.backends.vllm_double import Api
from trainers.backends import vllm as vllm_backend
from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.rollout.engine import RolloutEngine
from trainers.training.build import build_trainer


class Watched:
    """The trainer's in-process rollouts, recording the versions it is told and, at every run, whether
    it runs inside `generating()` and whether the vLLM engine holds the policy's current weights."""

    def __init__(self, engine: RolloutEngine, policy: torch.nn.Module) -> None:
        self.engine, self.policy = engine, policy
        self.versions: list[int] = []
        self.runs: list[tuple[bool, bool]] = []  # (inside generating, engine weights == policy weights)
        self._inside = 0

    @property
    def sampling(self):
        return self.engine.sampling

    @sampling.setter
    def sampling(self, value) -> None:
        self.engine.sampling = value

    @property
    def last_stats(self):
        return self.engine.last_stats

    @property
    def last_metrics(self) -> dict[str, float]:
        return self.engine.last_metrics

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def run(self, rows, samples_per_prompt=1, *, seed=None):
        held = dict(self.engine.backend.llm.model.named_parameters())
        same = all(torch.equal(held[name], p.detach()) for name, p in self.policy.named_parameters())
        self.runs.append((self._inside > 0, same))
        return self.engine.run(rows, samples_per_prompt, seed=seed)

    def prefetch(self, rows, samples_per_prompt, seed) -> None:
        self.engine.prefetch(rows, samples_per_prompt, seed)

    def policy_changed(self, version: int) -> None:
        self.versions.append(version)
        self.engine.policy_changed(version)

    @contextlib.contextmanager
    def generating(self) -> Iterator[None]:
        with self.engine.generating():
            self._inside += 1
            try:
                yield
            finally:
                self._inside -= 1


def vllm_run_config(tmp_path, tiny_model_dir) -> dict:
    train, held_out = make_splits(8, 2, seed=1)
    return {
        "output_dir": str(tmp_path / "run"),
        "model": {"path": str(tiny_model_dir), "device": "auto"},
        "generation": {"backend": "vllm"},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 6, "max_total_new_tokens": 6},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        "loss": {"kl": "k1", "kl_coef": 0.1},  # a frozen reference model
        "training": {"steps": 3},
        "optimizer": {"lr": 1e-2},
        "evaluation": {"every_steps": 2, "greedy": False, "pass_k": 1},
        "data": {
            "train_path": str(write_rows(train, tmp_path / "train.jsonl")),
            "eval_path": str(write_rows(held_out, tmp_path / "eval.jsonl")),
        },
    }


@pytest.mark.slow  # three PPO steps of the tiny model (about 6 s)
def test_each_update_reaches_the_engine_and_generation_runs_only_inside_generating(
    tmp_path, tiny_model_dir, monkeypatch
):
    torch.set_num_threads(1)
    monkeypatch.setattr(vllm_backend, "vllm_api", lambda: Api)  # vLLM's API, without vLLM
    trainer = build_trainer(validate_config(vllm_run_config(tmp_path, tiny_model_dir)))
    watched = Watched(trainer.rollouts, trainer.model)
    trainer.rollouts = trainer.evaluator.rollouts = watched
    backend = watched.engine.backend
    assert not trainer.optimizer._optimizer_step_post_hooks  # no hook carries the update to the engine
    with torch.no_grad(), pytest.raises(RuntimeError, match="generating"):
        watched.engine.run([{"id": "x", "question": "What is 1 + 1?"}], 1, seed=0)

    result = trainer.train()

    assert result.steps_done == 3
    assert watched.versions == [1, 2, 3]  # once per update, increasing
    # every rollout and evaluation (3 steps, evaluations at steps 2 and 3) inside generating(), with the
    # engine holding the policy's weights of that moment
    assert len(watched.runs) == 5 and all(inside and same for inside, same in watched.runs)
    # the policy as given, then after the updates of steps 1, 2 (evaluated at step 2) and 3 (the last
    # evaluation); step 3's rollout follows the evaluation at step 2 on the same weights
    assert backend.weight_loads == 4
    assert backend.asleep  # between rollouts the engine leaves the GPU to training


def test_the_frozen_reference_never_touches_the_engine(tmp_path, tiny_model_dir, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setattr(vllm_backend, "vllm_api", lambda: Api)
    trainer = build_trainer(validate_config(vllm_run_config(tmp_path, tiny_model_dir)))
    backend = trainer.rollouts.backend
    reference = trainer.reference
    assert reference is not None
    for model in (reference, trainer.model):  # neither carries a hook that drives the engine
        assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())
    with trainer.rollouts.generating():
        pass  # the engine loaded the policy and went to sleep
    log = list(backend.llm.calls.log)
    with torch.no_grad():
        reference(input_ids=torch.tensor([[1, 2, 3]]))
        trainer.model(input_ids=torch.tensor([[1, 2, 3]]))
    assert backend.llm.calls.log == log and backend.asleep  # neither forward woke or slept the engine
