"""`python -m trainers` for the device check's GRPO rows, one process per rank (or the single process).

The DeepSpeed tests' digit-fraction reward is registered (a random policy's responses would otherwise
all score the same, zero advantages), and at exit each process writes its peak memory to
`$GPU_CHECK_MEMORY_DIR/rank<RANK>.json`: CUDA's max_memory_allocated on a GPU, else the peak RSS.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
from pathlib import Path

import torch

from trainers.cli import main  # the repository root is on PYTHONPATH (check.py sets it)

ROOT = Path(__file__).resolve().parents[2]


def register_reward() -> str:
    """Import the DeepSpeed tests' `python -m trainers` wrapper, which registers their reward."""
    path = ROOT / "tests" / "trainers" / "training" / "deepspeed_main.py"
    spec = importlib.util.spec_from_file_location("deepspeed_main", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.REWARD


def peak_memory() -> dict[str, float | str]:
    """This process's peak memory in MiB, and what was measured."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return {"kind": "cuda max allocated", "mib": torch.cuda.max_memory_allocated() / 2**20}
    return {"kind": "peak RSS", "mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


if __name__ == "__main__":
    register_reward()
    code = main()
    out = os.environ.get("GPU_CHECK_MEMORY_DIR")
    if out:
        rank = os.environ.get("RANK", "0")
        Path(out, f"rank{rank}.json").write_text(json.dumps(peak_memory()), encoding="utf-8")
    sys.exit(code)
