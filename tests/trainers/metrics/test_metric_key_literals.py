"""Metric names are defined once, in trainers/metrics/keys.py: no other module spells one out."""

import ast
import re
from pathlib import Path

import trainers
from trainers.metrics import keys

ROOT = Path(trainers.__file__).parent
SECTIONS = "reward|rollout|tools|filter|loss|perf|time|train|advantage|sft"
METRIC = re.compile(rf"^({SECTIONS})/[A-Za-z0-9_@]+$")


def metric_literals(path: Path) -> list[tuple[int, str]]:
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and METRIC.match(node.value)
    ]


def test_no_metric_name_is_spelled_outside_keys():
    found = {
        f"{path.relative_to(ROOT)}:{line}": value
        for path in sorted(ROOT.rglob("*.py"))
        if path != ROOT / "metrics" / "keys.py"
        for line, value in metric_literals(path)
    }
    assert found == {}, "use the constants of trainers.metrics.keys"


def test_the_loops_own_keys_are_standard():
    for key in (keys.COMPLETIONS_PER_S, keys.TIME_ROLLOUT, keys.TRAIN_TRAJECTORIES, keys.TRAIN_LR,
                keys.ADVANTAGE_MEAN_ABS):  # fmt: skip
        assert key in keys.STANDARD_KEYS
    assert len(set(keys.STANDARD_KEYS)) == len(keys.STANDARD_KEYS)
