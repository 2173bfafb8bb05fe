"""The judge's strict answer formats: what it is told to write, how its answer is read, and how a ranking
becomes rewards.

Pointwise: one line `SCORE: <number from 0 to 10>`; reward = score / 10.
Groupwise: one line `RANKING: 3 > 1 = 4 > 2`, every candidate number exactly once, best first, `=` for
equally good ones. With n candidates, position p (0 = best) is worth 1 - p / (n - 1): the best 1, the
worst 0, evenly spaced between; tied candidates share the mean of the positions they occupy. A group of
one is worth 1.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_SCORE = 10
_SCORE_LINE = re.compile(r"^\s*SCORE:\s*(\d+(?:\.\d+)?)\s*$")
_RANKING_LINE = re.compile(r"^\s*RANKING:\s*(.*?)\s*$")


class FormatError(ValueError):
    """The judge's answer does not follow the strict format; the message says how."""


def pointwise_instruction() -> str:
    return (
        "You are a strict grader. Grade the response as the user's rubric asks. Think briefly if you need "
        "to, then end your answer with exactly one line of this form (no other line may start with SCORE:):\n"
        f"SCORE: <a number from 0 to {MAX_SCORE}>"
    )


def groupwise_instruction(n: int) -> str:
    example = " > ".join(str(i) for i in range(1, min(n, 3) + 1))
    return (
        f"You are a strict grader. You compare {n} candidate responses to the same task, numbered 1 to {n}. "
        "Rank them as the user's rubric asks. Think briefly if you need to, then end your answer with "
        "exactly one line of this form (no other line may start with RANKING:), naming every candidate "
        "number exactly once, best first, with '=' between equally good candidates:\n"
        f"RANKING: {example}"
    )


def _only_line(text: str, pattern: re.Pattern[str], label: str) -> re.Match[str]:
    lines = [line for line in text.splitlines() if line.strip().startswith(label)]
    if len(lines) != 1:
        raise FormatError(f"expected one {label} line, found {len(lines)}")
    match = pattern.match(lines[0])
    if match is None:
        raise FormatError(f"malformed {label} line: {lines[0].strip()[:80]!r}")
    return match


def parse_score(text: str) -> float:
    """The score of a `SCORE: x` line, 0 <= x <= 10."""
    match = _only_line(text, _SCORE_LINE, "SCORE:")
    score = float(match.group(1))
    if score > MAX_SCORE:
        raise FormatError(f"score {match.group(1)} is above {MAX_SCORE}")
    return score


def parse_ranking(text: str, n: int) -> list[list[int]]:
    """The tiers of a `RANKING:` line, best first: [[3], [1, 4], [2]] for `3 > 1 = 4 > 2`."""
    body = _only_line(text, _RANKING_LINE, "RANKING:").group(1)
    tiers = []
    for tier in body.split(">"):
        names = [name.strip() for name in tier.split("=")]
        if not all(name.isdigit() for name in names):
            raise FormatError(f"not a ranking of candidate numbers: {body[:80]!r}")
        tiers.append([int(name) for name in names])
    ranked = sorted(number for tier in tiers for number in tier)
    if ranked != list(range(1, n + 1)):
        raise FormatError(f"the ranking must name candidates 1 to {n} once each: {body[:80]!r}")
    return tiers


def ranking_rewards(tiers: list[list[int]], n: int) -> list[float]:
    """Rewards of candidates 1..n (in candidate order) from their tiers; see the module docstring."""
    if n == 1:
        return [1.0]
    rewards: dict[int, Fraction] = {}
    position = 0
    for tier in tiers:
        mean_position = Fraction(2 * position + len(tier) - 1, 2)
        for number in tier:
            rewards[number] = 1 - mean_position / (n - 1)
        position += len(tier)
    return [float(rewards[number]) for number in range(1, n + 1)]
