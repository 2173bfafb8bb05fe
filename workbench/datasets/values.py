"""Values of an uploaded row that the database and the code after it can take: JSON parsed within limits,
and every value checked (and Parquet's non-JSON scalars turned into JSON) before it is stored.

PostgreSQL refuses NaN and Infinity in jsonb, NUL in text and jsonb, and text that is not UTF-8 (a lone
surrogate escape such as "\\ud800"); deep nesting and huge integers end in RecursionError or ValueError
in recursive code far from the upload. Each is a `ValueProblem` naming the limit, so the row is refused
with a message instead of failing the whole upload."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import re
from typing import Any

from workbench.datasets.limits import UploadLimits

_SURROGATE = re.compile("[\ud800-\udfff]")


class ValueProblem(ValueError):
    """A value the dataset cannot store; the message says what and which limit."""


def parse(text: str, limits: UploadLimits) -> Any:
    """json.loads, refusing integers longer than the digit limit and nesting the decoder cannot follow
    (deeper than the interpreter's recursion limit; `check` applies the dataset's own depth limit)."""

    def integer(digits: str) -> int:
        if len(digits) - digits.startswith("-") > limits.max_int_digits:
            raise ValueProblem(_too_many_digits(limits))
        try:
            return int(digits)
        except ValueError:  # past the interpreter's own digit limit (sys.set_int_max_str_digits)
            raise ValueProblem(_too_many_digits(limits)) from None

    try:
        return json.loads(text, parse_int=integer)
    except RecursionError:
        raise ValueProblem(_too_deep(limits)) from None


def loads(text: str, limits: UploadLimits) -> Any:
    """JSON text (a CSV cell, a tool call's arguments) to a checked value."""
    return check(parse(text, limits), limits)


def check(value: Any, limits: UploadLimits, depth: int = 0) -> Any:
    """`value` as it will be stored; raises ValueProblem for what cannot be. Recursion stops at the
    depth limit, so a deeper value costs no more than the limit."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int):
        return _integer(value, limits)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueProblem(f"{value} is not a JSON number; use null (or an empty cell) when missing")
        return value
    if isinstance(value, dict | list | tuple):
        if depth >= limits.max_depth:
            raise ValueProblem(_too_deep(limits))
        if isinstance(value, dict):
            return {_key(k): check(v, limits, depth + 1) for k, v in value.items()}
        return [check(v, limits, depth + 1) for v in value]
    return _scalar(value)


def _text(value: str) -> str:
    if "\x00" in value:
        raise ValueProblem("contains a NUL character (\\u0000), which cannot be stored")
    if not value.isascii() and (match := _SURROGATE.search(value)):
        raise ValueProblem(f"contains an unpaired surrogate (\\u{ord(match.group()):04x}), which is not text")
    return value


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise ValueProblem(f"an object key must be text, got {type(key).__name__}")
    return _text(key)


def _integer(value: int, limits: UploadLimits) -> int:
    # 8**d < 10**d: ints of at most 3*d bits have at most d digits, and need no conversion to count.
    if value.bit_length() > 3 * limits.max_int_digits and abs(value) >= 10**limits.max_int_digits:
        raise ValueProblem(_too_many_digits(limits))
    return value


def _scalar(value: Any) -> Any:
    """Parquet's scalars that JSON lacks: decimals as text (exact), times as ISO 8601, bytes as UTF-8
    text (else base64)."""
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueProblem(f"{value} is not a JSON number; use null when missing")
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        try:
            return _text(value.decode("utf-8"))
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    raise ValueProblem(f"values of type {type(value).__name__} are not supported")


def _too_deep(limits: UploadLimits) -> str:
    return f"nested deeper than {limits.max_depth} levels, the limit"


def _too_many_digits(limits: UploadLimits) -> str:
    return f"an integer longer than {limits.max_int_digits} digits, the limit (write longer numbers as text)"
