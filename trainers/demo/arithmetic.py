"""Synthetic arithmetic problems for the demo: `a op b` with 2-4 digit operands and integer answers.

A model of a million parameters cannot multiply 4-digit numbers in its head, but it can learn to
copy a calculator's result: that gap is what RL with tools has to discover.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

OPS = ("+", "-", "*", "/")


@dataclass(frozen=True)
class Problem:
    """One task row: the question shown to the policy and its integer answer."""

    id: str
    question: str
    expression: str
    answer: int

    def row(self) -> dict:
        """A dataset row as the rollout engine and the rewards read it."""
        return {
            "id": self.id,
            "question": self.question,
            "expression": self.expression,
            "answer": str(self.answer),
        }


def _operands(rng: random.Random, op: str, min_digits: int, max_digits: int) -> tuple[int, int]:
    def number() -> int:
        digits = rng.randint(min_digits, max_digits)
        return rng.randint(10 ** (digits - 1), 10**digits - 1)

    a, b = number(), number()
    if op == "/":
        a = a * b  # exact division: the answer stays an integer
    return a, b


def make_problem(rng: random.Random, index: int, *, min_digits: int = 2, max_digits: int = 4) -> Problem:
    op = rng.choice(OPS)
    a, b = _operands(rng, op, min_digits, max_digits)
    answer = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]
    expression = f"{a} {op} {b}"
    return Problem(id=f"p{index}", question=f"What is {expression}?", expression=expression, answer=answer)


def make_splits(
    n_train: int, n_eval: int, *, seed: int = 0, min_digits: int = 2, max_digits: int = 4
) -> tuple[list[Problem], list[Problem]]:
    """Disjoint train and held-out eval problems (no expression appears in both)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[Problem] = []
    while len(problems) < n_train + n_eval:
        problem = make_problem(rng, len(problems), min_digits=min_digits, max_digits=max_digits)
        if problem.expression not in seen:
            seen.add(problem.expression)
            problems.append(problem)
    return problems[:n_train], problems[n_train:]


def write_rows(problems: list[Problem], path: str | Path) -> Path:
    """A JSONL dataset file (one row per problem) that `train` configs can point at."""
    path = Path(path)
    path.write_text("".join(json.dumps(p.row()) + "\n" for p in problems), encoding="utf-8")
    return path
