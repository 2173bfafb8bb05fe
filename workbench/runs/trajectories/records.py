"""A trajectory as the runs and the evaluations store it: indexed summary columns plus the whole record,
cleaned into what PostgreSQL text and jsonb accept."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from trainers.workbench_api import Trajectory

from ..models import TrajectoryRecord

STORE_MAX_DEPTH = 100  # a trajectory's own structure is ~6 levels; parsers cap arguments at 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: str) -> str:
    """Valid UTF-8 without NUL: a lone surrogate (a model's broken escape, "\\ud800" in a call) cannot
    be encoded and NUL is refused by PostgreSQL text and jsonb; each becomes U+FFFD (pairs are joined)."""
    if not value.isascii() and _SURROGATE.search(value):
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value.replace("\x00", "\ufffd")


def storable(value: Any, depth: int = 0) -> Any:
    """What PostgreSQL text and jsonb accept, whatever a model wrote: clean text (see `clean_text`), NaN or
    infinite floats (a -inf logprob, a NaN statistic) as null, and nesting past STORE_MAX_DEPTH as a
    note (jsonb and every recursive serialiser have a depth limit). Dataclasses become dicts as in
    `dataclasses.asdict`, which itself recursed out on a deeply nested tool call and lost the batch."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bool | int) or value is None:
        return value
    if depth >= STORE_MAX_DEPTH:
        return f"<nested deeper than {STORE_MAX_DEPTH} levels>"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: storable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {_key(k): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v, depth + 1) for v in value]
    return value


def _key(key: Any) -> Any:
    return clean_text(key) if isinstance(key, str) else storable(key, STORE_MAX_DEPTH)


def _correct(traj: Trajectory) -> bool | None:
    """Whether the answer was right: the trainer's own verdict, else the correctness reward's sign, else
    a component's answer sub-score (ARTIST's `<key>/answer`: 1 for a right answer)."""
    verdict = traj.metadata.get("correct")
    if isinstance(verdict, bool):
        return verdict
    if "correctness" in traj.rewards:
        return traj.rewards["correctness"] > 0
    answers = [value for key, value in traj.rewards.items() if key.endswith("/answer")]
    return any(value > 0 for value in answers) if answers else None


def trajectory_record(*, run_id: int, step: int, traj: Trajectory) -> TrajectoryRecord:
    """The row for one trajectory: indexed summary columns plus the full record."""
    return TrajectoryRecord(
        run_id=run_id,
        step=step,
        key=storable(f"{traj.group_id}/{traj.sample_index}"),
        group_id=storable(traj.group_id[:160]),
        sample_index=traj.sample_index,
        reward=float(traj.reward) if math.isfinite(traj.reward) else 0.0,
        advantage=storable(traj.advantage),
        correct=_correct(traj),
        num_turns=len(traj.assistant_turns),
        num_tool_calls=traj.num_tool_calls,
        num_failed_calls=traj.num_failed_calls,
        length=len(traj.response_token_ids),
        tool_counts=storable(traj.tool_calls_by_name()),
        final_answer=storable((traj.final_answer or "")[:300]),
        data=storable(traj),  # traj.to_dict(), without its recursion limit
    )


TRAJECTORY_FIELDS = [
    "group_id", "sample_index", "reward", "advantage", "correct", "num_turns", "num_tool_calls",
    "num_failed_calls", "length", "tool_counts", "final_answer", "data",
]  # fmt: skip
