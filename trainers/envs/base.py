"""Stateful text environments for multi-turn RL (RAGEN/StarPO): actions in, text grids and rewards out."""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from trainers.registry import Registry

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


class Environment(ABC):
    """reset() picks a level from a dataset row's `initial_state` (or a seed); step() applies one action.

    `state_hash()` identifies the exact state, so GiGPO can group steps that acted from the same state.
    With `describe`, the observation adds a line in words under the grid: what lies next to the player and
    where the goal lies from it, so a small policy need not learn to read positions off a text grid.
    """

    name: ClassVar[str]
    actions: ClassVar[tuple[str, ...]] = tuple(MOVES)
    legend: ClassVar[str]

    def __init__(
        self,
        *,
        max_steps: int = 20,
        invalid_action_penalty: float = 0.0,
        describe: bool = False,
        **level_defaults: Any,
    ) -> None:
        self.max_steps = max_steps
        self.describe = describe
        # RAGEN's format_penalty: the reward of a turn that took no action (a malformed or rejected call,
        # or no call), so that breaking a call is never cheaper than a move that costs reward
        self.invalid_action_penalty = invalid_action_penalty
        self.level_defaults = level_defaults
        self.steps = 0
        self.done = False
        self.last_reward = 0.0
        self.total_reward = 0.0
        self.rewards: list[float] = []  # every step's reward, in order

    def reset(self, initial_state: dict[str, Any] | None = None, seed: int | None = None) -> str:
        """Start a level: `initial_state` may give a literal `grid`, or generation params and a `seed`."""
        params = {**self.level_defaults, **(initial_state or {})}
        level_seed = params.pop("seed", seed)
        grid = params.pop("grid", None)
        if grid is not None:
            self._load([list(row) for row in grid])
        else:
            try:
                self._generate(random.Random(level_seed), **params)
            except TypeError as exc:  # a dataset row with a key this environment does not know
                raise ValueError(f"bad initial_state for {self.name}: {exc}") from None
        self.steps, self.done, self.last_reward, self.total_reward = 0, False, 0.0, 0.0
        self.rewards = []
        return self.observation()

    def step(self, action: str) -> tuple[str, float, bool]:
        """Apply one action; returns (observation, reward, done)."""
        if self.done:
            raise ValueError("the episode is over; no more actions are accepted")
        if action not in self.actions:
            raise ValueError(f"unknown action {action!r}; use one of {', '.join(self.actions)}")
        reward, finished = self._apply(action)
        self.steps += 1
        self.done = finished or self.steps >= self.max_steps
        self.last_reward = reward
        self.total_reward += reward
        self.rewards.append(reward)
        return self.observation(), reward, self.done

    def observation(self) -> str:
        """The grid, then (with `describe`) the surroundings in words."""
        return f"{self.grid()}\n{self.surroundings()}" if self.describe else self.grid()

    def grid(self) -> str:
        return "\n".join("".join(row) for row in self.render())

    def state_hash(self) -> str:
        """A stable hash of the exact state (the rendered grid encodes every position)."""
        return hashlib.sha256(f"{self.name}\n{self.grid()}".encode()).hexdigest()[:16]

    @abstractmethod
    def _generate(self, rng: random.Random, **params: Any) -> None:
        """Make a solvable level from the seeded generator."""

    @abstractmethod
    def _load(self, grid: list[list[str]]) -> None:
        """Take a literal level in the rendered symbols."""

    @abstractmethod
    def _apply(self, action: str) -> tuple[float, bool]:
        """Change the state; returns (reward, episode finished)."""

    @abstractmethod
    def render(self) -> list[list[str]]:
        """The state as a grid of symbols (see `legend`)."""

    @abstractmethod
    def surroundings(self) -> str:
        """The player's neighbourhood and the goal's direction in words (the `describe` line)."""


def offset_words(dr: int, dc: int) -> str:
    """A grid offset in words: (2, -1) is "2 down 1 left"; (0, 0) is "here"."""
    parts = [f"{abs(dr)} {'down' if dr > 0 else 'up'}"] if dr else []
    parts += [f"{abs(dc)} {'right' if dc > 0 else 'left'}"] if dc else []
    return " ".join(parts) or "here"


def grid_distances(
    start: tuple[int, int], passable: Callable[[tuple[int, int]], bool]
) -> dict[tuple[int, int], int]:
    """Breadth-first moves from `start` to every cell reachable through `passable` cells."""
    distance, frontier = {start: 0}, [start]
    for cell in frontier:  # the list grows while it is read: a queue without popping
        for dr, dc in MOVES.values():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in distance and passable(nxt):
                distance[nxt] = distance[cell] + 1
                frontier.append(nxt)
    return distance


ENVIRONMENTS: Registry[type[Environment]] = Registry("environment")
