"""Stateful text environments for multi-turn RL (RAGEN/StarPO): actions in, text grids and rewards out."""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from trainers.registry import Registry

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
# The largest side of a level, generated or literal: a dataset row cannot ask a rollout worker for a
# grid of millions of cells (RAGEN's largest levels are 8x8)
MAX_SIDE = 16


class Environment(ABC):
    """reset() picks a level from a dataset row's `initial_state` (or a seed); step() applies one action.

    `state_hash()` identifies the exact state, so GiGPO can group steps that acted from the same state.
    With `describe`, the observation adds a line in words under the grid: what lies next to the player and
    where the goal lies from it, so a small policy need not learn to read positions off a text grid.
    """

    name: ClassVar[str]
    actions: ClassVar[tuple[str, ...]] = tuple(MOVES)
    legend: ClassVar[str]
    symbols: ClassVar[str]  # every symbol a literal grid may hold (the legend's)

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
        try:
            if grid is not None:
                self._load(self._parse_grid(grid))
            else:  # a key this environment does not know is a TypeError
                self._generate(random.Random(level_seed), **params)
        except (TypeError, ValueError) as exc:
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

    def _parse_grid(self, grid: Any) -> list[list[str]]:
        """A literal level's rows as lists of symbols: a rectangle, MAX_SIDE a side at most, in `symbols`."""
        if not isinstance(grid, list) or not all(isinstance(row, str) for row in grid):
            raise ValueError("grid must be a list of rows, each a string of symbols")
        if not grid or not 1 <= len(grid[0]) <= MAX_SIDE or len(grid) > MAX_SIDE:
            raise ValueError(f"grid must have 1 to {MAX_SIDE} rows of 1 to {MAX_SIDE} symbols")
        if any(len(row) != len(grid[0]) for row in grid):
            raise ValueError("grid rows must all have the same length")
        unknown = sorted({sym for row in grid for sym in row} - set(self.symbols))
        if unknown:
            raise ValueError(f"unknown symbols {''.join(unknown)!r} in grid; the legend: {self.legend}")
        return [list(row) for row in grid]

    @abstractmethod
    def _generate(self, rng: random.Random, **params: Any) -> None:
        """Make a solvable level from the seeded generator; ValueError for parameters that cannot."""

    @abstractmethod
    def _load(self, grid: list[list[str]]) -> None:
        """Take a literal level in the rendered symbols; ValueError when it is not a level."""

    @abstractmethod
    def _apply(self, action: str) -> tuple[float, bool]:
        """Change the state; returns (reward, episode finished)."""

    @abstractmethod
    def render(self) -> list[list[str]]:
        """The state as a grid of symbols (see `legend`)."""

    @abstractmethod
    def surroundings(self) -> str:
        """The player's neighbourhood and the goal's direction in words (the `describe` line)."""


def check_whole(name: str, value: Any, low: int, high: int) -> None:
    """A level parameter must be a whole number from `low` to `high` (ValueError names it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high}, not {value!r}")


def check_one(name: str, cells: list[tuple[int, int]]) -> tuple[int, int]:
    """The one cell of a literal grid that holds `name` (ValueError when none or several do)."""
    if len(cells) != 1:
        raise ValueError(f"grid must hold exactly one {name}, not {len(cells)}")
    return cells[0]


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
