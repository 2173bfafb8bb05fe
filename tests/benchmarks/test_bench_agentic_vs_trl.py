"""The agentic benchmark against TRL runs end to end in a reduced mode, and both sides really call tools.

Speed is not asserted here (it is measured by running tests/benchmarks/bench_agentic_vs_trl.py itself);
the script runs as its own process, as `make bench` runs it, so its benchmark tool never joins this
process's tool registry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).with_name("bench_agentic_vs_trl.py")


@pytest.mark.slow
def test_reduced_benchmark_runs_both_tool_loops(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(BENCH), "--rounds", "1", "--steps", "1", "--threads", "1", "--prompts", "2",
           "--generations", "4", "--sft-steps", "120", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    for kind in ("ours", "trl"):
        (run,) = report["runs"][kind]
        assert run["kind"] == kind
        # the timed step's 8 completions called the 50 ms calculator, and no more often than the cap allows
        assert 0 < run["tool_calls"] <= 8 * 3
        assert run["policy_tokens"] > 0 and run["completions_per_s"] > 0 and run["peak_mb"] > 0
    summary = report["summary"]
    assert summary["speedup"] == pytest.approx(
        summary["ours"]["completions_per_s"] / summary["trl"]["completions_per_s"], rel=1e-9
    )
    assert summary["speedup_per_round"]["min"] == summary["speedup_per_round"]["max"]  # one round
