"""The GPU install is one consistent set: requirements-gpu.txt is requirements.txt with the pins vLLM
needs changed and vLLM added, and pip resolves it (deploy/check-gpu-requirements.sh, when the package
index is reachable)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# what vllm==0.33.0 asks of the CPU set's pins (its metadata; mistral-common's for numpy)
GPU_REPINS = {"torch": "2.14.0", "transformers": "5.20.2", "numpy": "2.3.5"}
# CPU pins the GPU set leaves out, and why (a conflict with vLLM's own pins)
GPU_OMITS = {"trackio": "trackio 0.43.0 needs pillow<13, vllm 0.33.0 pillow>=13"}
PIN = re.compile(r"^([A-Za-z0-9_.\-]+(?:\[[^\]]+\])?)==([^\s#]+)")


def pins(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            name = match.group(1).split("[")[0].lower()
            assert name not in found, f"{path.name} pins {name} twice"
            found[name] = match.group(2)
        else:
            assert not line.strip() or line.lstrip().startswith("#"), f"{path.name}: not a pin: {line!r}"
    return found


def test_the_gpu_set_is_the_cpu_set_with_vllms_pins():
    cpu, gpu = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-gpu.txt")
    assert gpu.pop("vllm") == "0.33.0"
    for name, version in GPU_REPINS.items():
        assert gpu.pop(name) == version, name
        cpu.pop(name)
    for name in GPU_OMITS:
        cpu.pop(name)
    assert gpu == cpu  # everything else (deepspeed included) installs exactly as on CPU machines


def index_reachable() -> bool:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "vllm"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "0.33.0" in out.stdout


@pytest.mark.slow
def test_pip_resolves_the_gpu_set():
    if os.environ.get("WORKBENCH_SKIP_INDEX_TESTS") or not index_reachable():
        pytest.skip("the package index (with vllm 0.33.0) is not reachable: the GPU set is not resolved here")
    out = subprocess.run(
        ["sh", str(ROOT / "deploy" / "check-gpu-requirements.sh")],
        capture_output=True, text=True, timeout=1200, env={**os.environ, "PYTHON": sys.executable},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    assert "vllm 0.33.0, torch 2.14.0, transformers 5.20.2, numpy 2.3.5" in out.stdout
