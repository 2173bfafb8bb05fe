"""A training checkpoint as a Hugging Face model directory: what serving stacks and `from_pretrained` load.

The export holds the weights as safetensors, the model config, the tokenizer with its chat template and
the generation config when the model has one; never the trainer's state (optimiser, RNGs, value head).
A full-weight checkpoint exports its model. A LoRA checkpoint exports its adapter in PEFT's format with
the base model's directory named in `adapter_config.json` (`PeftModel.from_pretrained` loads it onto
the base), or with `merge` the base model with the adapter folded into its weights (a plain model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainers.models.loading import load_tokenizer
from trainers.models.lora import base_model_path, is_adapter_dir


class ExportError(ValueError):
    """What was asked cannot be exported (not a checkpoint, or the output is not empty)."""


def export_checkpoint(checkpoint: str | Path, out: str | Path, *, merge: bool = False) -> Path:
    """Write `checkpoint` as a Hugging Face directory at `out` (new or empty); returns `out`.
    `merge`: a LoRA checkpoint as the merged model, not its adapter (full-weight ones are merged already)."""
    from trainers.training.checkpoint import STATE_FILE  # lazy: torch stays out of the CLI's start-up

    checkpoint, out = Path(checkpoint), Path(out)
    if not (checkpoint / STATE_FILE).is_file():
        raise ExportError(f"{checkpoint} is not a training checkpoint (no {STATE_FILE} in it)")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty: export into a new directory")
    model = checkpoint_model(checkpoint, merge=merge)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    generation = getattr(model, "generation_config", None)
    if generation is not None:  # a PEFT model saves the adapter alone: the base's generation settings too
        generation.save_pretrained(out)
    load_tokenizer(checkpoint).save_pretrained(out)
    return out


def checkpoint_model(checkpoint: Path, *, merge: bool = False) -> Any:
    """The checkpoint's policy as trained: its model, or for a LoRA checkpoint the base model with its
    adapter (folded into the weights with `merge`)."""
    from transformers import AutoModelForCausalLM

    if not is_adapter_dir(checkpoint):
        return AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype="auto")
    from peft import PeftModel

    base_path = base_model_path(checkpoint)
    if not (base_path / "config.json").exists():
        raise ExportError(f"the base model {base_path} that {checkpoint} names is not a model directory")
    base = AutoModelForCausalLM.from_pretrained(str(base_path), dtype="auto")
    model = PeftModel.from_pretrained(base, str(checkpoint))
    return model.merge_and_unload() if merge else model
