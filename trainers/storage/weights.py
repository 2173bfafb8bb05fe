"""Versioned policy weights in an `ArtifactStore`, so rollout workers sample from the trainer's policy.

The trainer publishes version v as `<prefix>/v{v:06d}/` (`save_pretrained`'s safetensors and config; the
tokenizer once, under `<prefix>/tokenizer`); a worker builds the model from the first version it sees and
afterwards loads a newer version into the model it has (no re-instantiation). Only the newest versions
are kept. Versions only grow, also across attempts of a run: a resumed trainer continues the numbering.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from trainers.models.device import model_device
from trainers.storage.store import ArtifactStore

TOKENIZER = "tokenizer"
_VERSION = re.compile(r"^v(\d{6,})$")


def version_key(prefix: str, version: int) -> str:
    return f"{prefix.rstrip('/')}/v{version:06d}"


def published_versions(store: ArtifactStore, prefix: str) -> list[int]:
    """Complete versions under `prefix`, oldest first."""
    found = (_VERSION.match(key.rsplit("/", 1)[-1]) for key in store.list_dirs(prefix))
    return sorted(int(m.group(1)) for m in found if m)


def publish_weights(
    store: ArtifactStore, prefix: str, model: Any, tokenizer: Any = None, *, keep: int = 2
) -> int:
    """Upload `model`'s weights as the next version (the tokenizer too, the first time); keep the newest
    `keep` versions. Returns the version number."""
    versions = published_versions(store, prefix)
    version = (versions[-1] + 1) if versions else 1
    with tempfile.TemporaryDirectory(prefix="weights-") as tmp:
        local = Path(tmp)
        if tokenizer is not None and not store.exists(f"{prefix}/{TOKENIZER}"):
            tokenizer.save_pretrained(local / TOKENIZER)
            store.put_dir(local / TOKENIZER, f"{prefix}/{TOKENIZER}")
        target = local / "version"
        target.mkdir()
        model.save_pretrained(target, safe_serialization=True)  # tied weights stored once
        store.put_dir(target, version_key(prefix, version))
    collect_versions(store, prefix, keep=keep)
    return version


def collect_versions(store: ArtifactStore, prefix: str, *, keep: int) -> list[int]:
    """Delete all but the newest `keep` versions; returns the deleted ones. A worker still reading a
    deleted version fails its job, which is sent again with the newest version."""
    old = published_versions(store, prefix)[:-keep] if keep > 0 else []
    for version in old:
        store.delete(version_key(prefix, version))
    return old


def fetch_version(store: ArtifactStore, prefix: str, version: int, local: Path) -> Path:
    """Download version `version` into `local` (a directory `from_pretrained` can read)."""
    return store.get_dir(version_key(prefix, version), Path(local))


def load_version(store: ArtifactStore, prefix: str, version: int, model: Any) -> None:
    """Load version `version` into the already loaded `model`, in place (same tensors, new values)."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory(prefix="weights-") as tmp:
        local = fetch_version(store, prefix, version, Path(tmp) / "version")
        state: dict[str, Any] = {}
        for shard in sorted(local.glob("*.safetensors")):
            state.update(load_file(str(shard), device=str(model_device(model))))
    missing, unexpected = model.load_state_dict(state, strict=False)
    current = model.state_dict()
    loaded = {current[name].data_ptr() for name in state}
    untied = [name for name in missing if current[name].data_ptr() not in loaded]
    if (
        untied or unexpected
    ):  # a tied weight (lm_head = embeddings) is stored once and loaded through its twin
        raise ValueError(f"weights v{version}: missing {untied}, unexpected {unexpected}")


def load_published_policy(store: ArtifactStore, prefix: str, version: int) -> tuple[Any, Any]:
    """(model, tokenizer) built from version `version` and the published tokenizer, in eval mode."""
    from trainers.models.model_io import load_policy

    with tempfile.TemporaryDirectory(prefix="weights-") as tmp:
        local = fetch_version(store, prefix, version, Path(tmp) / "version")
        tokenizer = store.get_dir(f"{prefix}/{TOKENIZER}", Path(tmp) / TOKENIZER)
        model, tokenizer = load_policy(local, tokenizer_path=tokenizer)
    model.eval()
    return model, tokenizer
