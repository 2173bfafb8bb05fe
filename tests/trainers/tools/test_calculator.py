"""The calculator: Python's precedence without eval, exact integers, bounded work."""

from __future__ import annotations

import asyncio

import pytest

from trainers.parsing.arithmetic import CalcError, Parser, calculate
from trainers.tools.calculator import Calculator


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
        ("10.0 ** 400", "result too large"),
        ("10 ** 400 + 1.0", "result too large"),
        ("1.0 - 10 ** 400", "result too large"),
        ("9" * 400 + ".0", "result too large"),
    ],
)
def test_bad_input_raises_a_clear_error(expression: str, message: str) -> None:
    with pytest.raises(CalcError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calculate(expression)


@pytest.mark.parametrize("expression", ["9**9**9**9", "2 ** 100000", "(2 ** 4000) * (2 ** 4000)"])
def test_a_too_large_result_is_refused_before_it_is_computed(expression: str, monkeypatch) -> None:
    """Powers and products are sized from their operands first, so the huge value (a tower of powers
    would take minutes and gigabytes) is never built: no value over the limit reaches the final check."""
    checked: list[int] = []
    check = Parser.check

    def spy(self: Parser, value):
        checked.append(value.bit_length() if isinstance(value, int) else 0)
        return check(self, value)

    monkeypatch.setattr(Parser, "check", spy)
    with pytest.raises(CalcError, match="too large"):
        calculate(expression, max_bits=4096)
    assert max(checked, default=0) <= 4096


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


@pytest.mark.parametrize("expression", ["10.0 ** 400", "10 ** 400 + 1.0", "10**400 - 0.5", "9" * 400 + ".5"])
def test_tool_reports_float_overflow_as_a_calculator_error(expression: str) -> None:
    """An int past float range meeting a float raised a raw OverflowError out of the parser."""
    result = asyncio.run(Calculator().invoke({"expression": expression}))
    assert (result.ok, result.error) == (False, "calculator error: result too large")


def test_a_huge_power_is_stopped_at_the_timeout_and_the_caller_goes_on() -> None:
    """With max_bits lifted, 3**20000000 is seconds of big-integer work in C, which no signal interrupts:
    it runs in a bounded child process, killed at the tool's timeout, so the observation says so at once
    and the next call is answered (by a fresh child)."""
    tool = Calculator(timeout_s=0.5, max_bits=10**9)

    async def calls() -> list:
        return [await tool.invoke({"expression": e}) for e in ("3**20000000", "3**200000000", "6 * 7")]

    huge, larger, small = asyncio.run(calls())
    for result in (huge, larger):
        assert not result.ok and result.error == "calculator timed out after 0.5s"
    assert (small.ok, small.output) == (True, "42")


def test_a_result_too_long_to_print_is_a_calculator_error() -> None:
    """Past Python's 4300 printed digits the value has no repr: an observation, not a ValueError."""
    result = asyncio.run(Calculator(max_bits=10**6).invoke({"expression": "7 ** 100000"}))
    assert not result.ok and result.error.startswith("calculator error: result has more than")
