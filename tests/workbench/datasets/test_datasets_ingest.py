"""Pass 1 streams: memory stays flat however long the file is."""

import json
import tracemalloc
from dataclasses import replace

import pytest

from workbench.datasets.ingest import SplitConfig, validate_file
from workbench.datasets.limits import UploadLimits


@pytest.mark.slow
def test_validation_memory_does_not_grow_with_the_file(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for i in range(60_000):
            handle.write(
                json.dumps({"question": f"What is {i} + {i}? " + "x" * 100, "answer": str(2 * i)}) + "\n"
            )
    size = path.stat().st_size
    tracemalloc.start()
    report = validate_file(
        path,
        "jsonl",
        SplitConfig("ratio", 0.1, 0),
        limits=replace(UploadLimits.from_settings(), max_upload_bytes=10 * size),
        progress=lambda *_: None,
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (report.rows, report.error_count, report.eval_rows) == (60_000, 0, 6_000)
    assert size > 9_000_000 and peak < 1_000_000  # a 9.5 MB file, under 1 MB of Python allocations


def test_progress_is_reported_from_the_file_position(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": "q", "answer": i}) + "\n" for i in range(3000)))
    seen = []
    validate_file(
        path,
        "jsonl",
        SplitConfig("ratio"),
        limits=UploadLimits.from_settings(),
        progress=lambda f, m: seen.append((f, m)),
    )
    assert [m for _, m in seen] == ["Checked 1000 rows", "Checked 2000 rows", "Checked 3000 rows"]
    assert all(0 < f <= 1 for f, _ in seen) and seen[-1][0] == 1.0
