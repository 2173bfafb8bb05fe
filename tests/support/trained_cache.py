"""Trained test policies kept on disk between test sessions. Training a fixture's policy is deterministic
(seeded, one torch thread): the same settings and the same code give the same weights, byte for byte. So
it is built once into pytest's cache directory (.pytest_cache/d/trained), under a key hashed from its
settings, the trainers code and the torch and transformers versions, and later sessions read it; any
change to one of those is a new key, built afresh (the stale entries of that name are removed). Without
pytest's cache (`-p no:cacheprovider`) it is built into the session's temporary directory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

TRAINERS = Path(__file__).resolve().parents[2] / "trainers"


@functools.cache
def code_fingerprint() -> str:
    """A hash of every trainers source file and of the libraries that train and save the weights."""
    import torch
    import transformers

    digest = hashlib.sha256(f"{torch.__version__} {transformers.__version__}".encode())
    for source in sorted(TRAINERS.rglob("*")):
        if source.is_file() and source.suffix in {".py", ".jinja", ".json", ".yaml"}:
            digest.update(str(source.relative_to(TRAINERS)).encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def cache_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("trained") if cache is not None else tmp_path_factory.getbasetemp() / "trained"


def trained(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    settings: dict,
    build: Callable[[Path, dict], None],
) -> Path:
    """The folder `build(folder, settings)` fills, built once for these settings and this code."""
    key = hashlib.sha256((json.dumps(settings, sort_keys=True) + code_fingerprint()).encode()).hexdigest()
    root = cache_root(request, tmp_path_factory)
    folder = root / f"{name}-{key[:16]}"
    if folder.is_dir():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))  # renamed only once complete
    build(staging, settings)
    for stale in root.glob(f"{name}-*"):
        if stale != folder:  # another process may be reading this key's folder, built while we built ours
            shutil.rmtree(stale, ignore_errors=True)
    try:
        staging.rename(folder)
    except OSError:  # another session finished the same build first: the same bytes
        shutil.rmtree(staging, ignore_errors=True)
    return folder
