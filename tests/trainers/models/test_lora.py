"""LoRA policies (real PEFT on the tiny model): sampling sees the adapters, the KL reference does not."""

from __future__ import annotations

import pytest
import torch

from trainers.backends.base import GenerationRequest
from trainers.backends.hf import HFBackend
from trainers.config.loader import ConfigError, validate_config
from trainers.config.sampling import SamplingParams
from trainers.config.sections import LoraConfig
from trainers.models.lora import apply_lora, is_peft, unwrap
from trainers.models.model_io import load_policy
from trainers.training.policy import collate, forward_policy, frozen_copy, reference_logprobs
from trainers.trajectory import Trajectory, Turn

LORA = LoraConfig(r=4, alpha=8.0)


def set_adapters(model, seed: int = 0, scale: float = 0.3) -> None:
    """Non-zero adapter weights (PEFT starts lora_B at zero, where the adapted model is the base)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale)


@pytest.fixture
def lora_policy(tiny_model_dir):
    torch.manual_seed(0)
    model, tokenizer = load_policy(tiny_model_dir)
    model = apply_lora(model, LORA, base_path=tiny_model_dir)
    set_adapters(model)
    return model.eval(), tokenizer


def sampled_trajectories(prompts, outputs) -> list[Trajectory]:
    trajectories = []
    for i, (prompt, out) in enumerate(zip(prompts, outputs, strict=True)):
        turns = [
            Turn(role="prompt", text="", token_ids=prompt, loss_mask=[0] * len(prompt)),
            Turn(role="assistant", text="", token_ids=out.token_ids, loss_mask=[1] * len(out.token_ids)),
        ]
        trajectories.append(Trajectory(uid=str(i), group_id=str(i), sample_index=0, turns=turns))
    return trajectories


def test_only_the_adapters_train_and_the_base_model_names_itself(lora_policy, tiny_model_dir):
    model, _ = lora_policy
    assert is_peft(model) and not is_peft(unwrap(model))
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert model.peft_config["default"].base_model_name_or_path == str(tiny_model_dir.resolve())


def test_a_lora_policy_samples_what_its_own_forward_gives(lora_policy):
    model, tokenizer = lora_policy
    backend = HFBackend(model, tokenizer, prefix_cache_tokens=0)
    texts = ["What is 12 + 30?", "Hi there", "Sort 3 1 2"]
    prompts = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    sampling = SamplingParams(temperature=1.0, seed=7)
    outputs = backend.generate([GenerationRequest(p, 10, [], sampling) for p in prompts])
    batch = collate(sampled_trajectories(prompts, outputs), tokenizer.pad_token_id)
    with torch.no_grad():
        adapted = forward_policy(model, batch, with_entropy=False).logprobs
        with model.disable_adapter():
            base = forward_policy(model, batch, with_entropy=False).logprobs
    for i, out in enumerate(outputs):
        n = len(out.token_ids)
        assert out.logprobs == pytest.approx(adapted[i, :n].tolist(), rel=1e-4, abs=1e-5)
    assert not torch.allclose(adapted, base, atol=1e-3)  # the adapters change what is sampled


def test_the_kl_reference_is_the_base_model_with_adapters_disabled(lora_policy, tiny_model_dir):
    model, tokenizer = lora_policy
    base, _ = load_policy(tiny_model_dir)
    frozen = frozen_copy(base)
    prompts = [tokenizer.encode(t, add_special_tokens=False) for t in ("1 + 2 =", "Hello world")]
    outputs = HFBackend(model, tokenizer).generate(
        [GenerationRequest(p, 8, [], SamplingParams(temperature=1.0, seed=3)) for p in prompts]
    )
    batch = collate(sampled_trajectories(prompts, outputs), tokenizer.pad_token_id)
    with torch.no_grad():
        via_adapters_off = reference_logprobs(model, batch)
        via_copy = reference_logprobs(frozen, batch)
        policy = forward_policy(model, batch, with_entropy=False).logprobs
    assert torch.allclose(via_adapters_off, via_copy, rtol=1e-5, atol=1e-6)
    kl = (policy - via_adapters_off) * batch.response_mask
    kl_copy = (policy - via_copy) * batch.response_mask
    assert kl.abs().sum() > 0 and torch.allclose(kl, kl_copy, rtol=1e-4, atol=1e-5)
    # the pass left the adapters on
    assert torch.equal(forward_policy(model, batch, with_entropy=False).logprobs.detach(), policy)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model": {"lora": {"r": 0}}}, "model.lora.r"),
        ({"model": {"lora": {"target_modules": []}}}, "model.lora.target_modules"),
        ({"model": {"lora": {}}, "training": {"engine": "deepspeed"}}, "DeepSpeed with LoRA is unsupported"),
        ({"model": {"lora": {}}, "rollout": {"backend": "remote"}}, "workers take full weights"),
    ],
)
def test_lora_settings_are_validated(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(overrides)
    assert validate_config({"model": {"lora": {"r": 4}}}).model.lora.r == 4
