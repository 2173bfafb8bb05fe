"""Train-inference mismatch: the sampler's log-probs lined up with the trainer's, the mismatch metric,
truncated importance sampling in the loss, and a run whose rollouts come from the vLLM adapter (over
the API double) reporting rollout/logprob_mismatch_* every step."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.trainers.backends.vllm_double import Api
from trainers.backends import vllm as vllm_backend
from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.losses.objective import PolicyLossConfig, policy_objective
from trainers.metrics import keys
from trainers.training.build import build_trainer
from trainers.training.mismatch import mismatch_metrics, sampler_logprobs
from trainers.training.policy import collate
from trainers.trajectory import Trajectory, Turn


def turn(role, ids, logprobs=None):
    return Turn(role, "", ids, [1 if role == "assistant" else 0] * len(ids), logprobs)


def test_sampler_logprobs_line_up_with_the_response_columns():
    a = Trajectory("a", "g", turns=[
        turn("prompt", [1, 2]), turn("assistant", [3, 4], [-0.1, -0.2]), turn("tool", [5]),
        turn("assistant", [6], [-0.3]),
    ])  # fmt: skip
    b = Trajectory("b", "g", turns=[turn("prompt", [1]), turn("assistant", [7], [-0.4])])
    batch = collate([a, b], pad_token_id=0)
    got = sampler_logprobs([a, b], batch.response_ids.shape[1])
    assert got.flatten().tolist() == pytest.approx([-0.1, -0.2, 0.0, -0.3, -0.4, 0.0, 0.0, 0.0])
    b.turns[1].logprobs = None  # a turn without sampler log-probs: nothing to compare
    assert sampler_logprobs([a, b], 4) is None


def test_mismatch_is_the_mean_and_max_gap_over_policy_tokens():
    trainer = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -9.0, 0.0]])
    sampler = torch.tensor([[-1.1, -2.0, -2.5], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])  # the 9.0 gap is on a tool token
    got = mismatch_metrics(trainer, sampler, mask)
    assert got[keys.LOGPROB_MISMATCH_MEAN] == pytest.approx(0.6 / 4, rel=1e-5)
    assert got[keys.LOGPROB_MISMATCH_MAX] == pytest.approx(0.5, rel=1e-5)
    assert mismatch_metrics(trainer, sampler, torch.zeros_like(mask)) == {}


def test_truncated_importance_sampling_weights_each_token_by_the_capped_ratio():
    logp = torch.tensor([[-1.0, -1.2, -0.7]], requires_grad=True)
    old = torch.tensor([[-1.0, -1.0, -1.0]])
    sampler = torch.tensor([[-1.5, -1.0, -0.8]])  # old/sampler ratios e^0.5, 1, e^-0.2
    adv = torch.tensor([[1.0, -1.0, 0.5]])
    mask = torch.ones(1, 3)
    base = policy_objective(PolicyLossConfig(), logp=logp, old_logp=old, advantages=adv, mask=mask)
    plain = policy_objective(
        PolicyLossConfig(), logp=logp, old_logp=old, advantages=adv, mask=mask, sampler_logp=sampler
    )
    # no cap: the sampler's log-probs change nothing
    assert float(plain.loss.detach()) == float(base.loss.detach())
    tis = policy_objective(
        PolicyLossConfig(tis_cap=1.5),
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        sampler_logp=sampler,
    )
    ratio = (logp.detach() - old).exp()
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    weights = torch.tensor([[1.5, 1.0, math.exp(-0.2)]])  # e^0.5 = 1.65 is capped at 1.5
    assert float(tis.loss.detach()) == pytest.approx(float((per_token * weights).mean()), rel=1e-6)
    assert tis.stats[keys.LOSS_TIS_WEIGHT] == pytest.approx(float(weights.mean()), rel=1e-6)
    (grad,) = torch.autograd.grad(tis.loss, logp)
    (plain_grad,) = torch.autograd.grad(plain.loss, logp)
    assert grad.flatten().tolist() == pytest.approx(
        (plain_grad * weights).flatten().tolist(), rel=1e-5
    )  # weights are constants


def test_tis_needs_the_trainer_as_old_policy():
    with pytest.raises(ValueError, match="old_logprobs: trainer"):
        validate_config({"mismatch": {"tis_cap": 2.0, "old_logprobs": "sampler"}})


def run_config(tmp_path, tiny_model_dir, **overrides) -> dict:
    train, held_out = make_splits(8, 2, seed=1)
    tmp_path.mkdir(parents=True, exist_ok=True)
    return {
        "output_dir": str(tmp_path / "run"),
        "model": {"path": str(tiny_model_dir)},
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 6, "max_total_new_tokens": 6},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
        "reward": {"components": [{"name": "correctness", "params": {"mode": "numeric"}}]},
        "training": {"steps": 2},
        "optimizer": {"lr": 1e-2},
        "data": {
            "train_path": str(write_rows(train, tmp_path / "train.jsonl")),
            "eval_path": str(write_rows(held_out, tmp_path / "eval.jsonl")),
        },
        **overrides,
    }


def metrics(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_run_on_the_vllm_adapter_loads_each_update_and_reports_the_mismatch(
    tmp_path, tiny_model_dir, monkeypatch
):
    torch.set_num_threads(1)
    monkeypatch.setattr(vllm_backend, "vllm_api", lambda: Api)  # vLLM's API, without vLLM
    config = validate_config(run_config(
        tmp_path, tiny_model_dir, model={"path": str(tiny_model_dir), "device": "auto"},
        generation={"backend": "vllm", "vllm": {"gpu_memory_utilization": 0.4}},
        mismatch={"tis_cap": 2.0},
    ))  # fmt: skip
    trainer = build_trainer(config)
    backend = trainer.rollouts.backend
    assert isinstance(backend, vllm_backend.VLLMBackend)
    assert backend.llm.kwargs["gpu_memory_utilization"] == 0.4
    trainer.train()
    rows = metrics(tmp_path)
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        # the engine holds the trainer's weights when it samples: only float noise between the two
        assert 0.0 <= row[keys.LOGPROB_MISMATCH_MEAN] <= row[keys.LOGPROB_MISMATCH_MAX] < 1e-3
        assert row[keys.LOSS_TIS_WEIGHT] == pytest.approx(1.0, rel=1e-3)
    assert backend.weight_loads >= 2  # before step 1 and after its update
    engine_params = dict(backend.llm.model.named_parameters())
    if not backend.stale:  # the last evaluation loaded the final weights
        for name, p in trainer.model.named_parameters():
            assert torch.equal(engine_params[name], p.detach())
    assert ("sleep", 1) in backend.llm.calls.log


def test_vllm_needs_a_gpu_device(tmp_path, tiny_model_dir):
    config = validate_config(run_config(tmp_path, tiny_model_dir, generation={"backend": "vllm"}))
    with pytest.raises(ValueError, match="CUDA"):
        build_trainer(config)


@pytest.mark.slow
def test_the_hf_backend_measures_its_mismatch_on_request(tmp_path, tiny_model_dir):
    torch.set_num_threads(1)
    plain = build_trainer(validate_config(run_config(tmp_path / "a", tiny_model_dir)))
    plain.train()
    assert keys.LOGPROB_MISMATCH_MEAN not in metrics(tmp_path / "a")[0]  # no extra forward unless asked
    config = run_config(tmp_path / "b", tiny_model_dir, mismatch={"measure": True, "old_logprobs": "sampler"})
    build_trainer(validate_config(config)).train()
    for row in metrics(tmp_path / "b"):
        assert 0.0 <= row[keys.LOGPROB_MISMATCH_MEAN] < 1e-3  # the same model's KV-cache sampling loop
