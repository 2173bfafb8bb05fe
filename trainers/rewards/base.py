"""The reward component protocol: validated parameters, a per-trajectory, per-group and per-batch score."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from trainers.registry import Registry
from trainers.trajectory import Trajectory


@dataclass(frozen=True)
class RewardContext:
    """What a reward may know besides the trajectory: the training step and the run's template."""

    step: int = 0
    total_steps: int | None = None
    template: str | None = None


class NoParams(BaseModel):
    """Parameters of a component that takes none; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class RewardComponent(ABC):
    """Subclass, set `name` and `Params`, implement `score`, register with `@REWARDS.register(name)`.

    Parameters are validated on construction, so a bad reward definition fails before a run starts.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, **params: Any) -> None:
        self.params = self.Params(**params)

    def __eq__(self, other: object) -> bool:
        # equal definitions (e.g. a config and its JSON round trip) must compare equal
        return type(self) is type(other) and self.params == other.params  # type: ignore[attr-defined]

    @abstractmethod
    def score(self, trajectory: Trajectory, ctx: RewardContext) -> float:
        """The raw (unweighted) reward of one trajectory."""

    def score_group(self, trajectories: Sequence[Trajectory], ctx: RewardContext) -> list[float]:
        """Scores of the samples of one prompt; components that compare samples override this."""
        return [self.score(t, ctx) for t in trajectories]

    def score_batch(self, groups: Sequence[Sequence[Trajectory]], ctx: RewardContext) -> list[list[float]]:
        """Scores of every group of a batch; components that batch their work (e.g. requests to a judge
        model, sent concurrently) override this."""
        return [self.score_group(group, ctx) for group in groups]

    def parts(self, trajectory: Trajectory, ctx: RewardContext) -> dict[str, float]:
        """Named sub-scores recorded next to the total (e.g. ARTIST's answer, format, tool ratio)."""
        del trajectory, ctx  # most components have no sub-scores
        return {}


REWARDS: Registry[type[RewardComponent]] = Registry("reward component")
NOTES_KEY = "notes"  # trajectory.metadata[NOTES_KEY]: why a reward may not mean what it says


def add_note(trajectory: Trajectory, note: str) -> None:
    """Record `note` once in the trajectory's metadata (stored and shown with the trajectory)."""
    notes = trajectory.metadata.setdefault(NOTES_KEY, [])
    if note not in notes:
        notes.append(note)


def assistant_text(trajectory: Trajectory) -> str:
    """The policy's own text (assistant turns only, no tool output or template glue)."""
    return "".join(t.text for t in trajectory.assistant_turns)
