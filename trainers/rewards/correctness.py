"""Answer correctness: math equivalence (math-verify, sympy fallback), exact match or numeric tolerance."""

from __future__ import annotations

import math
import re
import threading
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.parsing.answers import extract_boxed, extract_tag
from trainers.rewards.base import REWARDS, RewardComponent, RewardContext, assistant_text
from trainers.trajectory import Trajectory

Mode = Literal["math", "exact", "numeric"]

# sympy's parse_expr evaluates Python: only plain arithmetic over single-letter symbols may reach it
_SAFE_EXPR = re.compile(r"^[0-9A-Za-z+\-*/^().,\s]{1,200}$")
_ALLOWED_WORDS = {"sqrt", "pi", "exp", "log", "sin", "cos", "tan"}
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
MAX_MATH_CHARS = 200  # longer "answers" are not parsed symbolically


class CorrectnessParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = Field(
        "math", description="math: symbolic equivalence; exact: string match; numeric: tolerance"
    )
    rel_tol: float = Field(1e-6, ge=0.0, description="numeric mode: relative tolerance")
    abs_tol: float = Field(1e-9, ge=0.0, description="numeric mode: absolute tolerance")
    case_sensitive: bool = Field(False, description="exact mode: compare case")
    correct: float = Field(1.0, description="reward of a correct answer")
    incorrect: float = Field(0.0, description="reward of a wrong or missing answer")
    answer_key: str = Field("answer", description="ground-truth field holding the reference answer")


def predicted_answer(trajectory: Trajectory) -> str | None:
    """The rollout's parsed final answer, else the last \\boxed{} or <answer> of the policy text."""
    if trajectory.final_answer is not None:
        return trajectory.final_answer
    text = assistant_text(trajectory)
    boxed = extract_boxed(text)
    return boxed if boxed is not None else extract_tag(text, "answer")


def _math_verify_equal(pred: str, gold: str) -> bool:
    from math_verify import parse, verify

    # math-verify times out with signal.alarm, which only the main thread may use
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    # a bare "1+x" is read as its first number; inside $...$ it is read as an expression
    gold_parsed = parse(f"${gold}$", parsing_timeout=timeout)
    pred_parsed = parse(f"${pred}$", parsing_timeout=timeout)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))


def _sympy_equal(pred: str, gold: str) -> bool:
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


# commas only as thousands separators: 1-3 leading digits (no leading zero), then groups of exactly
# three; no "+" sign, which math-verify reads as a set ("+1,234" is {1, 234})
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d*)?")


def _to_number(text: str) -> float | None:
    """A plain number (integer, decimal or fraction) as a float, else None.

    A comma is read only as a thousands separator in its valid place (1,234 and 12,345,678.5); any
    other comma makes the text not a plain number, so "1,2" (a list, or a decimal comma) is never 12.
    math-verify reads it alike: "1,2" is the set {1, 2}, "1,234" is 1234, and a trailing "." or ","
    is punctuation.
    """
    cleaned = text.strip().replace("$", "").rstrip(".,")
    if "," in cleaned:
        if not _THOUSANDS.fullmatch(cleaned):
            return None
        cleaned = cleaned.replace(",", "")
    try:
        return float(Fraction(cleaned))
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(pred: str | None, gold: object, params: CorrectnessParams) -> bool:
    """Whether `pred` answers `gold` under the params' mode."""
    if pred is None or gold is None:
        return False
    pred, gold_text = pred.strip(), str(gold).strip()
    if params.mode == "exact":
        if not params.case_sensitive:
            pred, gold_text = pred.lower(), gold_text.lower()
        return " ".join(pred.split()) == " ".join(gold_text.split())
    if params.mode == "numeric":
        a, b = _to_number(pred), _to_number(gold_text)
        return (
            a is not None
            and b is not None
            and math.isclose(a, b, rel_tol=params.rel_tol, abs_tol=params.abs_tol)
        )
    return _math_equal(pred, gold_text)


@lru_cache(maxsize=4096)
def _math_equal(pred: str, gold: str) -> bool:
    """Symbolic equivalence, with fast paths: a group's samples often repeat an answer, and parsing
    prose as LaTeX (every letter a symbol) costs seconds on a CPU."""
    if pred == gold:
        return True
    a, b = _to_number(pred), _to_number(gold)
    if a is not None and b is not None:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)  # math-verify's 6-digit rounding
    if len(pred) > MAX_MATH_CHARS:
        return False
    if b is not None and _PROSE_WORD.search(_LATEX_COMMAND.sub("", pred)):
        return False  # words are not a number
    return _math_verify_equal(pred, gold) or _sympy_equal(pred, gold)


def is_correct(trajectory: Trajectory, params: CorrectnessParams | None = None) -> bool:
    """Whether the trajectory's final answer matches its ground truth (default: math equivalence)."""
    params = params or CorrectnessParams()
    return answers_match(predicted_answer(trajectory), trajectory.ground_truth.get(params.answer_key), params)


@REWARDS.register("correctness")
class Correctness(RewardComponent):
    """Rule-based outcome reward (DeepSeekMath, ToRL): `correct` if the answer matches, else `incorrect`."""

    name = "correctness"
    Params = CorrectnessParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return self.params.correct if is_correct(trajectory, self.params) else self.params.incorrect
