"""Symbolic equivalence of two math answers (math-verify, then sympy), and a cheap guard against answers
whose evaluation alone would take minutes (numeric power towers, huge factorials).

`symbolic_equal` runs in a bounded worker (see trainers.rewards.correctness): sympy and Python's big
integers can run for hours on a short string without ever reaching a point an alarm could interrupt.
The guard spares the worker the obvious cases, so one of them costs no worker restart.
"""

from __future__ import annotations

import logging
import math
import re

MAX_DIGITS = 10_000  # of an integer power or factorial an answer may ask to evaluate
MAX_BASE_DIGITS = 100  # longer numbers are not raised to powers
# sympy's parse_expr evaluates Python: only plain arithmetic over single-letter symbols may reach it
_SAFE_EXPR = re.compile(r"^[0-9A-Za-z+\-*/^().,\s]{1,200}$")
_ALLOWED_WORDS = {"sqrt", "pi", "exp", "log", "sin", "cos", "tan"}
_GROUPING = re.compile(r"\s+|[{}()]|\\left|\\right")
_POWER_CHAIN = re.compile(r"\d+(?:\^-?\d+)+")
_FACTORIAL = re.compile(r"(\d+)!")
_DECIMAL_EXPONENT = re.compile(r"\d[eE][-+]?\d{4,}")  # sympy reads 1e99999999 as a Float of that size


class _OwnTimeouts(logging.Filter):
    """Drops math-verify's warning that its timeouts are off: the bounded worker is the timeout."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_OwnTimeouts())


def _power_digits(chain: str) -> float:
    """Decimal digits of the right-associated power a^b^...^z (inf when beyond MAX_DIGITS)."""
    numbers = chain.replace("-", "").split("^")
    if any(len(n) > MAX_BASE_DIGITS for n in numbers):
        return math.inf
    *bases, value = (int(n) for n in numbers)
    digits = 1.0
    for base in reversed(bases):
        if base <= 1:
            value, digits = base, 1.0
            continue
        if value > MAX_DIGITS * 4:  # 2^(4 * MAX_DIGITS) already has more than MAX_DIGITS digits
            return math.inf
        digits = value * math.log10(base)
        if digits > MAX_DIGITS:
            return math.inf
        value = base**value
    return digits


def _factorial_digits(number: str) -> float:
    if len(number) > 6:
        return math.inf
    return math.lgamma(int(number) + 1) / math.log(10)


def too_costly(text: str) -> str | None:
    """Why evaluating `text` would be unreasonably expensive, or None. Grouping is ignored, so a
    power chain counts as right-associated: an upper bound of its size."""
    flat = _GROUPING.sub("", text.replace("**", "^"))
    for chain in _POWER_CHAIN.findall(flat):
        if _power_digits(chain) > MAX_DIGITS:
            return f"the power {chain[:40]} has more than {MAX_DIGITS} digits"
    if _DECIMAL_EXPONENT.search(flat):
        return "a decimal exponent of more than three digits"
    for number in _FACTORIAL.findall(flat):
        if _factorial_digits(number) > MAX_DIGITS:
            return f"the factorial {number[:40]}! has more than {MAX_DIGITS} digits"
    return None


def math_verify_equal(pred: str, gold: str) -> bool:
    from math_verify import parse, verify

    # no signal.alarm timeouts: the worker's CPU limit and deadline bound the whole check
    # a bare "1+x" is read as its first number; inside $...$ it is read as an expression
    gold_parsed = parse(f"${gold}$", parsing_timeout=None)
    pred_parsed = parse(f"${pred}$", parsing_timeout=None)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def sympy_equal(pred: str, gold: str) -> bool:
    """Fallback when math-verify cannot parse: simplify(pred - gold) == 0 on sanitized input."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    for text in (pred, gold):
        words = re.findall(r"[A-Za-z]+", text)
        if not _SAFE_EXPR.match(text) or any(len(w) > 1 and w not in _ALLOWED_WORDS for w in words):
            return False
    try:
        a = parse_expr(pred.replace("^", "**"))
        b = parse_expr(gold.replace("^", "**"))
        return bool(sympy.simplify(a - b) == 0)
    except Exception:  # unparsable text is simply not equal
        return False


def symbolic_equal(pred: str, gold: str) -> bool:
    """Whether the two answers are mathematically equal: math-verify, else sympy on plain arithmetic."""
    return math_verify_equal(pred, gold) or sympy_equal(pred, gold)
