"""The device check's dry mode: `tests/gpu/check.sh --cpu` runs every section on the CPU and prints its table.

It keeps the script from rotting between the runs on a GPU machine; the numbers mean nothing here, so
only their presence is checked: every row the GPU table has, each with a number (vLLM: a reason to skip).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("check.sh")
NUMBER = r"-?[\d,]+(\.\d+)?(e-?\d+)?"
ROWS = {  # (section, measure) -> the value's pattern
    ("model", "parameters (M)"): NUMBER,
    ("generation", "HF backend, fast decoder tok/s"): NUMBER,
    ("generation", "HF backend, model calls tok/s"): NUMBER,
    ("generation", "model.generate tok/s"): NUMBER,
    ("generation", "fast decoder / model.generate"): NUMBER + "x",
    ("generation", "vLLM tok/s"): rf"({NUMBER}|skipped: .+)",
    ("logprobs", "bf16 vs fp32 mean abs gap"): NUMBER,
    ("logprobs", "bf16 vs fp32 max abs gap"): NUMBER,
    ("grpo", "single-process engine"): rf"{NUMBER} s/step, {NUMBER} MiB",
    ("grpo", "DeepSpeed ZeRO-2, 2 rank(s)"): rf"{NUMBER} s/step, {NUMBER} MiB",
    ("grpo", "DeepSpeed ZeRO-3, 2 rank(s)"): rf"{NUMBER} s/step, {NUMBER} MiB",
    ("demo", "wall time (s)"): NUMBER,
    ("demo", "tool-call rate after RL"): NUMBER,
    ("demo", "accuracy after RL"): NUMBER,
}


def table_rows(text: str) -> dict[tuple[str, str], str]:
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
             if line.startswith("| ") and not line.startswith("| section")]  # fmt: skip
    return {(c[0], c[1]): c[2] for c in cells}


def test_dry_mode_prints_and_writes_every_row(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(SCRIPT), "--cpu"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    written = (tmp_path / "gpu-check.md").read_text()
    assert written.strip() in done.stdout
    assert "--cpu dry mode" in written.splitlines()[0]
    rows = table_rows(written)
    assert set(rows) == set(ROWS), written
    for key, pattern in ROWS.items():
        assert re.fullmatch(pattern, rows[key]), (key, rows[key])


def test_failing_section_is_reported_and_fails_the_check(tmp_path):
    """A section that raises puts its error in the table, the others still run, and the exit status is 1."""
    from tests.gpu import check

    def broken(bench):
        raise RuntimeError("no such kernel")

    sections = [("model", check.model_section), ("logprobs", broken)]
    table, ok = run_with(check, sections, tmp_path)
    rows = table_rows(table)
    assert not ok
    assert rows[("logprobs", "logprobs: FAILED")] == "error: RuntimeError: no such kernel"
    assert re.fullmatch(NUMBER, rows[("model", "parameters (M)")])


def run_with(check, sections, work: Path) -> tuple[str, bool]:
    saved = check.SECTIONS[:]
    check.SECTIONS[:] = sections
    try:
        return check.run_checks(check.CPU, work)
    finally:
        check.SECTIONS[:] = saved
