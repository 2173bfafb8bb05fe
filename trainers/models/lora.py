"""LoRA adapters on a policy with PEFT: wrapping, recognising, and loading a checkpoint's adapter.

PEFT injects its adapter layers into the base model's modules in place, so the base model's own forward
(`unwrap`) runs the adapted policy, and `PeftModel.disable_adapter()` runs the base model on the same
weights (the KL reference of a LoRA run, without a second copy).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from trainers.config.sections import LoraConfig

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def is_peft(model: Any) -> bool:
    """Whether `model` is a PEFT model (without importing peft: no PEFT model exists before it is)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def unwrap(model: Any) -> Any:
    """The module whose forward runs the policy: the base model of a PEFT model (adapters injected)."""
    return model.get_base_model() if is_peft(model) else model


def apply_lora(model: nn.Module, lora: LoraConfig, base_path: str | Path | None = None) -> Any:
    """`model` wrapped with fresh LoRA adapters; only the adapters require gradients. `base_path`: the
    base model's directory, named in the adapter's config (and so in its checkpoints and exports)."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    config = PeftLoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules), task_type="CAUSAL_LM",
    )  # fmt: skip
    if base_path is not None:
        config.base_model_name_or_path = str(Path(base_path).resolve())
    return get_peft_model(model, config)


def is_adapter_dir(path: str | Path) -> bool:
    """Whether a directory holds a PEFT adapter (a LoRA checkpoint or export)."""
    return (Path(path) / ADAPTER_CONFIG).exists()


def load_adapter_weights(model: Any, path: str | Path) -> None:
    """Set a PEFT model's adapter weights to those saved in `path` (its `save_pretrained` output)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result = set_peft_model_state_dict(model, load_file(Path(path) / ADAPTER_WEIGHTS))
    missing = [key for key in result.missing_keys if "lora_" in key]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"adapter {path} does not fit the model: missing {missing}, unexpected {result.unexpected_keys}"
        )


def base_model_path(path: str | Path) -> Path:
    """The base model directory an adapter directory names."""
    import json

    config = json.loads((Path(path) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    if not base:
        raise ValueError(f"adapter {path} does not name its base model")
    return Path(base)
