"""The calculator: Python's precedence without eval, exact integers, bounded work."""

from __future__ import annotations

import asyncio
import time

import pytest

from trainers.tools.calculator import CalcError, Calculator, calculate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("-2 ** 2", -4),  # unary minus binds looser than **
        ("2 ** -1", 0.5),
        ("2 ** 3 ** 2", 512),  # right-associative: 2 ** 9
        ("7 // 2", 3),
        ("-7 // 2", -4),  # floor division rounds down
        ("-7 % 3", 2),  # the sign follows the divisor
        ("10 / 4", 2.5),
        ("1.5 + .5", 2.0),
        ("--3", 3),
        ("+(4)", 4),
        ("2*(3+(4-1))/4", 3.0),
        ("123456789 * 987654321", 121932631112635269),
    ],
)
def test_values_follow_python_arithmetic(expression: str, expected: float) -> None:
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "negative power"),
        ("(-8) ** 0.5", "fractional power"),
        ("3 * (4 + 5", "missing ')'"),
        ("2 +", "unexpected end"),
        ("2 3", "unexpected '3'"),
        ("", "empty expression"),
        ("2 + x", "unexpected character 'x'"),
        ("__import__('os')", "unexpected character '_'"),
        ("2 ** 100000", "result too large"),
        ("(2 ** 4000) * (2 ** 4000)", "result too large"),
        ("1.5 ** 10000", "result too large"),
        ("(" * 100 + "1" + ")" * 100, "nested deeper"),
    ],
)
def test_bad_input_raises_a_clear_error(expression: str, message: str) -> None:
    with pytest.raises(CalcError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calculate(expression)


def test_tower_of_powers_fails_fast() -> None:
    start = time.perf_counter()
    with pytest.raises(CalcError, match="too large"):
        calculate("9**9**9**9")
    assert time.perf_counter() - start < 0.05


def test_tool_returns_repr_of_the_value() -> None:
    result = asyncio.run(Calculator().invoke({"expression": "(3 + 4.5) * 2"}))
    assert (result.ok, result.output) == (True, "15.0")


def test_tool_reports_arithmetic_errors_as_observations() -> None:
    result = asyncio.run(Calculator().invoke({"expression": "1/0"}))
    assert (result.ok, result.output) == (False, "calculator error: division by zero")


def test_tool_validates_arguments() -> None:
    result = asyncio.run(Calculator().invoke({"expr": "1"}))
    assert not result.ok
    assert result.error == "invalid arguments for calculator: 'expression' is a required property"
