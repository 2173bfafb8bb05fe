"""Answer correctness: math equivalence (math-verify, sympy fallback), exact match or numeric tolerance."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainers.bounded import BoundedCallError, BoundedRunner, BoundsExceeded, Limits
from trainers.parsing.answers import extract_boxed, extract_tag
from trainers.rewards.base import REWARDS, RewardComponent, RewardContext, add_note, assistant_text
from trainers.rewards.math_check import too_costly
from trainers.trajectory import Trajectory

Mode = Literal["math", "exact", "numeric"]

# Symbolic checks run in worker processes: a check past these bounds counts as wrong, with a note.
CHECK_LIMITS = Limits(cpu_s=5, wall_s=10.0, memory_mb=1024, output_bytes=1024)
SYMBOLIC_EQUAL = "trainers.rewards.math_check:symbolic_equal"
CHECKER = BoundedRunner(CHECK_LIMITS, preload=("trainers.rewards.math_check", "math_verify", "sympy"))
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


# commas only as thousands separators: 1-3 leading digits (no leading zero), then groups of exactly
# three; no "+" sign, which math-verify reads as a set ("+1,234" is {1, 234})
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d*)?")
_BIG_EXPONENT = re.compile(r"[eE][-+]?\d{4,}")


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
    if _BIG_EXPONENT.search(cleaned):
        return None  # Fraction would build 10 ** exponent: minutes for 1e99999999
    try:
        return float(Fraction(cleaned))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


@dataclass(frozen=True)
class AnswerCheck:
    """The verdict, and why it may not be a real comparison (the check timed out or was refused)."""

    correct: bool
    note: str | None = None


def check_answer(pred: str | None, gold: object, params: CorrectnessParams) -> AnswerCheck:
    """Whether `pred` answers `gold` under the params' mode; never runs unbounded."""
    if pred is None or gold is None:
        return AnswerCheck(False)
    pred, gold_text = pred.strip(), str(gold).strip()
    if params.mode == "exact":
        if not params.case_sensitive:
            pred, gold_text = pred.lower(), gold_text.lower()
        return AnswerCheck(" ".join(pred.split()) == " ".join(gold_text.split()))
    if params.mode == "numeric":
        a, b = _to_number(pred), _to_number(gold_text)
        close = (
            a is not None
            and b is not None
            and math.isclose(a, b, rel_tol=params.rel_tol, abs_tol=params.abs_tol)
        )
        return AnswerCheck(close)
    return _math_equal(pred, gold_text)


def answers_match(pred: str | None, gold: object, params: CorrectnessParams) -> bool:
    """Whether `pred` answers `gold` under the params' mode."""
    return check_answer(pred, gold, params).correct


def _math_equal(pred: str, gold: str) -> AnswerCheck:
    """Symbolic equivalence, with fast paths: a group's samples often repeat an answer, and parsing
    prose as LaTeX (every letter a symbol) costs seconds on a CPU."""
    if pred == gold:
        return AnswerCheck(True)
    a, b = _to_number(pred), _to_number(gold)
    if a is not None and b is not None:
        return AnswerCheck(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9))  # math-verify's 6-digit rounding
    if len(pred) > MAX_MATH_CHARS:
        return AnswerCheck(False)
    if b is not None and _PROSE_WORD.search(_LATEX_COMMAND.sub("", pred)):
        return AnswerCheck(False)  # words are not a number
    try:
        return _symbolic_check(pred, gold)
    except (BoundsExceeded, BoundedCallError) as exc:  # the worker died or the check raised: not cached
        return AnswerCheck(False, f"answer check failed: {exc}")


@lru_cache(maxsize=4096)
def _symbolic_check(pred: str, gold: str) -> AnswerCheck:
    """math-verify / sympy in a bounded worker; a check that runs out of time or memory counts as wrong."""
    reason = too_costly(pred) or too_costly(gold)
    if reason is not None:
        return AnswerCheck(False, f"answer check refused: {reason}")
    try:
        return AnswerCheck(bool(CHECKER.call(SYMBOLIC_EQUAL, pred, gold)))
    except BoundsExceeded as exc:
        if exc.kind == "crash":
            raise
        what = "timed out" if exc.kind == "time" else "stopped"
        return AnswerCheck(False, f"answer check {what}: {exc}")


def is_correct(trajectory: Trajectory, params: CorrectnessParams | None = None) -> bool:
    """Whether the trajectory's final answer matches its ground truth (default: math equivalence).

    A check that could not compare (timed out, refused) is False and leaves a note on the trajectory."""
    params = params or CorrectnessParams()
    gold = trajectory.ground_truth.get(params.answer_key)
    check = check_answer(predicted_answer(trajectory), gold, params)
    if check.note is not None:
        add_note(trajectory, check.note)
    return check.correct


@REWARDS.register("correctness")
class Correctness(RewardComponent):
    """Rule-based outcome reward (DeepSeekMath, ToRL): `correct` if the answer matches, else `incorrect`."""

    name = "correctness"
    Params = CorrectnessParams

    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        return self.params.correct if is_correct(trajectory, self.params) else self.params.incorrect
