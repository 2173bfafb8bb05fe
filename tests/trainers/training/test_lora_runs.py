"""LoRA runs end to end on a tiny random policy: adapter-only checkpoints, exact resume, frozen base."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers.sft_configs import tiny_sft_config
from trainers.config.loader import validate_config
from trainers.demo.catalog import expert_conversations
from trainers.models.lora import ADAPTER_WEIGHTS, base_model_path, is_peft
from trainers.models.model_io import load_policy
from trainers.training.build import build_trainer
from trainers.training.checkpoint import latest_checkpoint
from trainers.training.run import run_config
from trainers.training.sinks import read_jsonl

TIMING_PREFIXES = ("time/", "perf/")


def lora_config(model_dir, data, out, **overrides):
    base = {
        "seed": 3,
        "output_dir": str(out),
        "model": {"path": str(model_dir), "lora": {"r": 4, "alpha": 8.0, "dropout": 0.1}},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "rollout": {"prompts_per_step": 2, "samples_per_prompt": 4},
        "reward": {"components": [{"name": "test_digit_fraction"}]},
        "loss": {"kl": "k3", "kl_coef": 0.1},
        "optimizer": {"lr": 1e-2},
        "training": {"steps": 4, "ppo_epochs": 2, "minibatch_size": 4},
        "evaluation": {"every_steps": 0},
        "checkpoint": {"every_steps": 2},
        "data": {"train_path": str(data[0]), "eval_path": str(data[1])},
    }
    base.update(overrides)
    return validate_config(base)


def learning_metrics(run_dir):
    return [
        {k: v for k, v in m.items() if not k.startswith(TIMING_PREFIXES)}
        for m in read_jsonl(run_dir / "metrics.jsonl")
    ]


def adapter_state(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


@pytest.mark.slow
def test_a_lora_run_trains_its_adapters_alone_and_resumes_exactly(model_dir, data, tmp_path):
    full = build_trainer(lora_config(model_dir, data, tmp_path / "full"))
    assert is_peft(full.model) and full.reference is full.model  # no second copy of the weights
    base_before = {
        k: v.clone() for k, v in full.model.get_base_model().state_dict().items() if "lora_" not in k
    }
    full.train()
    after = {k: v for k, v in full.model.get_base_model().state_dict().items() if "lora_" not in k}
    assert all(torch.equal(base_before[k], after[k]) for k in base_before)  # the base stays frozen
    checkpoint = latest_checkpoint(tmp_path / "full")
    assert (checkpoint / ADAPTER_WEIGHTS).exists() and not (checkpoint / "model.safetensors").exists()
    lora_b = [v for k, v in adapter_state(full.model).items() if "lora_B" in k]
    assert any(
        v.abs().sum() > 0 for v in lora_b
    )  # the adapters moved away from the base model (B starts at 0)

    first = build_trainer(
        lora_config(model_dir, data, tmp_path / "split"), should_stop=lambda: trainer_step() >= 2
    )
    trainer_step = lambda: first.step  # noqa: E731
    assert first.train().stopped
    second = build_trainer(lora_config(model_dir, data, tmp_path / "split"))
    second.resume(latest_checkpoint(tmp_path / "split"))
    assert second.step == 2
    second.train()
    full_metrics, split = learning_metrics(tmp_path / "full"), learning_metrics(tmp_path / "split")
    assert [m["step"] for m in split] == [1, 2, 3, 4]
    assert all(m["loss/kl"] > 0 for m in full_metrics[1:])  # KL to the adapters-off base model
    for a, b in zip(full_metrics[2:], split[2:], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), key
    ours, theirs = adapter_state(full.model), adapter_state(second.model)
    assert ours.keys() == theirs.keys()
    assert all(torch.allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-7) for k in ours)


def test_the_sft_stage_and_rl_train_the_same_adapters_of_the_bundled_model(tmp_path):
    raw = tiny_sft_config(tmp_path, expert_conversations(8), sft={"batch_size": 4, "epochs": 1}, steps=1)
    config = validate_config({**raw, "model": {**raw["model"], "lora": {"r": 2}}})
    result = run_config(config)
    assert result.sft is not None and result.sft.steps > 0
    checkpoint = latest_checkpoint(result.run_dir)
    assert not (checkpoint / "model.safetensors").exists()
    assert base_model_path(checkpoint) == (result.run_dir / "base_model").resolve()
    base, tokenizer = load_policy(result.run_dir / "base_model")
    trained = AutoModelForCausalLM.from_pretrained(str(checkpoint))  # the base with the checkpoint's adapter
    ids = torch.tensor([tokenizer.encode("1 + 2", add_special_tokens=False)])
    with torch.no_grad():
        assert not torch.allclose(trained(input_ids=ids).logits, base.eval()(input_ids=ids).logits)
