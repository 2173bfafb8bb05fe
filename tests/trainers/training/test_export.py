"""`python -m trainers export`: checkpoints as Hugging Face directories that load with equal logits."""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from tests.trainers.models.test_lora import LORA, set_adapters
from trainers.cli import main
from trainers.models.loading import load_tokenizer
from trainers.models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, apply_lora, base_model_path
from trainers.models.model_io import load_policy
from trainers.training.checkpoint import STATE_FILE, save_checkpoint
from trainers.training.export import ExportError, export_checkpoint

HF_FILES = ("generation_config.json", "tokenizer.json", "tokenizer_config.json")
MODEL_FILES = ("config.json", "model.safetensors")  # a merged model's; an adapter's are PEFT's two files
ADAPTER_FILES = (ADAPTER_CONFIG, ADAPTER_WEIGHTS)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def logits(model, tokenizer) -> torch.Tensor:
    """Logits of a fixed two-row batch (one row left-padded)."""
    rows = [tokenizer.encode(t, add_special_tokens=False) for t in ("What is 12 + 30?", "Hi")]
    width = max(map(len, rows))
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.no_grad():
        return model.eval()(input_ids=ids, attention_mask=mask).logits


def checkpoint_of(model, tokenizer, tmp_path):
    return save_checkpoint(
        tmp_path / "run" / "checkpoints" / "step_000001", step=1, model=model, tokenizer=tokenizer
    )


def assert_hf_directory(out, weights: tuple[str, ...] = MODEL_FILES) -> None:
    for name in HF_FILES + weights:
        assert (out / name).exists(), name
    for name in set(MODEL_FILES + ADAPTER_FILES) - set(weights):
        assert not (out / name).exists(), name
    assert not (out / STATE_FILE).exists()
    assert load_tokenizer(out).chat_template  # the chat template travels with the tokenizer


def test_a_full_weight_checkpoint_exports_its_model(tiny_model_dir, tmp_path):
    model, tokenizer = load_policy(tiny_model_dir)
    with torch.no_grad():  # weights unlike the base model's, as after training
        model.model.norm.weight.mul_(1.5)
    checkpoint = checkpoint_of(model, tokenizer, tmp_path)
    out = tmp_path / "export"
    assert main(["export", str(checkpoint), str(out)]) == 0
    assert_hf_directory(out)
    exported = AutoModelForCausalLM.from_pretrained(str(out))
    torch.testing.assert_close(logits(exported, tokenizer), logits(model, tokenizer), rtol=1e-5, atol=1e-6)


def test_a_lora_checkpoint_exports_its_adapter_or_the_merged_model(tiny_model_dir, tmp_path):
    model, tokenizer = load_policy(tiny_model_dir)
    model = apply_lora(model, LORA, base_path=tiny_model_dir)
    set_adapters(model)
    expected = logits(model, tokenizer)
    checkpoint = checkpoint_of(model, tokenizer, tmp_path)

    adapter = export_checkpoint(checkpoint, tmp_path / "adapter")
    assert_hf_directory(adapter, ADAPTER_FILES)
    assert base_model_path(adapter) == tiny_model_dir.resolve()
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    loaded = PeftModel.from_pretrained(base, str(adapter))
    torch.testing.assert_close(logits(loaded, tokenizer), expected, rtol=1e-5, atol=1e-6)
    # transformers loads an adapter directory onto the base it names as well
    direct = AutoModelForCausalLM.from_pretrained(str(adapter))
    torch.testing.assert_close(logits(direct, tokenizer), expected, rtol=1e-5, atol=1e-6)

    merged = tmp_path / "merged"
    assert main(["export", str(checkpoint), str(merged), "--merge"]) == 0
    assert_hf_directory(merged)
    plain = AutoModelForCausalLM.from_pretrained(str(merged))
    assert not any("lora_" in name for name, _ in plain.named_parameters())
    torch.testing.assert_close(logits(plain, tokenizer), expected, rtol=1e-4, atol=1e-5)


def test_export_refuses_what_is_not_a_checkpoint_in_one_line(tiny_model_dir, tmp_path, capsys):
    assert main(["export", str(tiny_model_dir), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is not a training checkpoint" in err and str(tiny_model_dir) in err
    assert not (tmp_path / "out").exists()
    taken = tmp_path / "taken"
    (taken / "file").parent.mkdir()
    (taken / "file").write_text("x")
    model, tokenizer = load_policy(tiny_model_dir)
    with pytest.raises(ExportError, match="not empty"):
        export_checkpoint(checkpoint_of(model, tokenizer, tmp_path), taken)
