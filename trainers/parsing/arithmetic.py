"""Arithmetic without eval: Python's precedence and exact integers, with the work bounded by the size of
the result (`max_bits`) and the nesting (`max_depth`), so `9**9**9**9` fails fast.

Standard library only: the calculator tool evaluates in a bounded child process (trainers.bounded) that
imports this module alone, so a child replaced after a timeout starts in a blink.
"""

from __future__ import annotations

import math
import re
import sys

Number = int | float
TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|(\*\*|//|[-+*/%()]))")


class CalcError(ValueError):
    """A user-facing arithmetic error (syntax, division by zero, a result too large)."""


def tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match:
            raise CalcError(f"unexpected character {text[pos:].lstrip()[:1]!r} at position {pos}")
        tokens.append(match.group(1) or match.group(2))
        pos = match.end()
    return tokens


class Parser:
    """Recursive descent with Python's precedence: + - < * / // % < unary - < ** (right-associative)."""

    def __init__(self, tokens: list[str], *, max_bits: int, max_depth: int) -> None:
        self.tokens, self.pos = tokens, 0
        self.max_bits, self.max_depth, self.depth = max_bits, max_depth, 0

    def parse(self) -> Number:
        if not self.tokens:
            raise CalcError("empty expression")
        value = self.expr()
        if self.pos < len(self.tokens):
            raise CalcError(f"unexpected {self.tokens[self.pos]!r} at token {self.pos + 1}")
        return value

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise CalcError("unexpected end of expression")
        self.pos += 1
        return token

    def expr(self) -> Number:
        value = self.term()
        while self.peek() in ("+", "-"):
            op, right = self.take(), self.term()
            try:  # an int past float range meeting a float overflows on conversion: 10**400 + 1.0
                result = value + right if op == "+" else value - right
            except OverflowError:
                raise CalcError("result too large") from None
            value = self.check(result)
        return value

    def term(self) -> Number:
        value = self.unary()
        while self.peek() in ("*", "/", "//", "%"):
            op, right = self.take(), self.unary()
            value = self.binary(op, value, right)
        return value

    def unary(self) -> Number:
        if self.peek() in ("-", "+"):
            op = self.take()
            self.enter()
            value = self.unary()
            self.depth -= 1
            return -value if op == "-" else value
        return self.power()

    def power(self) -> Number:
        base = self.atom()
        if self.peek() != "**":
            return base
        self.take()
        self.enter()
        exponent = self.unary()  # right-associative, and 2**-1 is allowed
        self.depth -= 1
        return self.pow(base, exponent)

    def atom(self) -> Number:
        token = self.take()
        if token == "(":
            self.enter()
            value = self.expr()
            self.depth -= 1
            if self.peek() != ")":
                raise CalcError("missing ')'")
            self.take()
            return value
        if token[0].isdigit() or token[0] == ".":
            return self.check(float(token) if "." in token else int(token))  # a 400-digit float is inf
        raise CalcError(f"unexpected {token!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise CalcError(f"expression nested deeper than {self.max_depth}")

    def binary(self, op: str, a: Number, b: Number) -> Number:
        if op != "*" and b == 0:
            raise CalcError("division by zero")
        big = op == "*" and isinstance(a, int) and isinstance(b, int)
        if big and a.bit_length() + b.bit_length() > self.max_bits:
            raise CalcError("result too large")
        try:
            result = {"*": lambda: a * b, "/": lambda: a / b, "//": lambda: a // b, "%": lambda: a % b}[op]()
        except OverflowError:
            raise CalcError("result too large") from None
        return self.check(result)

    def pow(self, base: Number, exponent: Number) -> Number:
        if base == 0 and exponent < 0:
            raise CalcError("zero cannot be raised to a negative power")
        grows = isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1
        if grows and exponent * math.log2(abs(base)) > self.max_bits:  # sized before computing: stays fast
            raise CalcError("result too large")
        try:
            result = base**exponent
        except OverflowError:
            raise CalcError("result too large") from None
        if isinstance(result, complex):
            raise CalcError("fractional power of a negative number")
        return self.check(result)

    def check(self, value: Number) -> Number:
        if isinstance(value, float) and not math.isfinite(value):
            raise CalcError("result too large")
        if isinstance(value, int) and value.bit_length() > self.max_bits:
            raise CalcError("result too large")
        return value


def calculate(
    expression: str, *, max_bits: int = 4096, max_depth: int = 64, max_length: int = 1000
) -> Number:
    """Evaluate `expression` exactly for integers, as Python floats otherwise; raise CalcError on misuse."""
    if len(expression) > max_length:
        raise CalcError(f"expression longer than {max_length} characters")
    return Parser(tokenize(expression), max_bits=max_bits, max_depth=max_depth).parse()


def calculate_text(expression: str, max_bits: int, max_depth: int) -> dict[str, str]:
    """In the bounded child: {"value": the result's repr} or {"error": the calculator's message}."""
    try:
        value = calculate(expression, max_bits=max_bits, max_depth=max_depth)
    except CalcError as exc:
        return {"error": str(exc)}
    except RecursionError:
        return {"error": "expression nested too deeply"}
    try:
        return {"value": repr(value)}
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return {"error": f"result has more than {sys.get_int_max_str_digits()} digits"}
