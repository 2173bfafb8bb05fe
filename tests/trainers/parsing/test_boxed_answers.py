"""`\\boxed{}` extraction: nested braces, the last box, and work linear in the text."""

from __future__ import annotations

import random
import re
import sys

import pytest

from trainers.parsing.answers import extract_boxed


def _reference(text: str) -> str | None:
    """The definition, box by box: from each box's "{", the first place its depth returns to zero."""
    last = None
    for box in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth = 0
        for i in range(box.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                last = text[box.end() : i].strip()
                break
    return last


def _lines_run(text: str) -> int:
    """Python lines executed by one extract_boxed call (a count, not a time)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        extract_boxed(text)
    finally:
        sys.settrace(None)
    return count


def test_nested_braces_and_the_last_closed_box():
    assert extract_boxed("\\boxed{\\frac{a}{b^{2}}}") == "\\frac{a}{b^{2}}"
    assert extract_boxed("\\boxed{1} and \\boxed{\\{2\\}}") == "\\{2\\}"
    assert extract_boxed("\\boxed{\\boxed{3}}") == "3"  # the inner box opens last
    assert extract_boxed("\\boxed{1} then \\boxed{2") == "1"  # an unclosed box does not count
    assert extract_boxed("} \\fbox {4} {") == "4"
    assert extract_boxed("{ \\boxed{5 }") == "5"
    assert extract_boxed("no box {}") is None


def test_agrees_with_the_box_by_box_definition_on_random_texts():
    rng = random.Random(0)
    pieces = ["\\boxed{", "\\fbox {", "{", "}", "x", " "]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        assert extract_boxed(text) == _reference(text), text


@pytest.mark.timeout(120)  # the box-by-box scan needed ~n^2/2 steps here: 5e7 traced lines at 10k
def test_ten_thousand_unclosed_boxes_take_linear_work():
    small, large = (_lines_run("\\boxed{" * n) for n in (10_000, 20_000))
    assert extract_boxed("\\boxed{" * 10_000 + "\\boxed{ok}") == "ok"
    assert large <= 2 * small  # quadratic work would quadruple
