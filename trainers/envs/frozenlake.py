"""FrozenLake as in RAGEN: walk from the start to the goal without falling into a hole."""

from __future__ import annotations

import random
from typing import Any

from trainers.envs.base import (
    ENVIRONMENTS,
    MAX_SIDE,
    MOVES,
    Environment,
    check_one,
    check_whole,
    grid_distances,
    offset_words,
)

Cell = tuple[int, int]


def has_path(holes: set[Cell], shape: tuple[int, int], start: Cell, goal: Cell) -> bool:
    """Is the goal reachable from the start over frozen cells?"""

    def frozen(cell: Cell) -> bool:
        return 0 <= cell[0] < shape[0] and 0 <= cell[1] < shape[1] and cell not in holes

    return goal in grid_distances(start, frozen)


@ENVIRONMENTS.register("frozenlake")
class FrozenLake(Environment):
    """Reward 1 on reaching the goal; falling into a hole ends the episode with 0. `slip_prob` moves
    the player sideways with that probability (Gym's slippery ice), drawn from the level's seed."""

    name = "frozenlake"
    legend = "P player, _ frozen ice, O hole, G goal, X player in a hole, W player on the goal"
    symbols = "P_OGXW"

    def __init__(self, *, max_steps: int = 20, slip_prob: float = 0.0, **level_defaults: Any) -> None:
        super().__init__(max_steps=max_steps, **{"size": 4, "p_frozen": 0.8, **level_defaults})
        self.slip_prob = slip_prob
        self.rng = random.Random(0)

    def _generate(
        self, rng: random.Random, *, size: int = 4, p_frozen: float = 0.8, corners: bool = False
    ) -> None:
        """A random map; `corners` puts the start top-left and the goal bottom-right, as Gym's
        generate_random_map (and so RAGEN) does, else both are drawn at random."""
        check_whole("size", size, 2, MAX_SIDE)
        if isinstance(p_frozen, bool) or not isinstance(p_frozen, int | float) or not 0 < p_frozen <= 1:
            raise ValueError(f"p_frozen must be a number above 0 and at most 1, not {p_frozen!r}")
        self.rng = rng
        cells = [(r, c) for r in range(size) for c in range(size)]
        for _ in range(10_000):  # Gym's generate_random_map: resample until BFS finds a path
            start, goal = ((0, 0), (size - 1, size - 1)) if corners else rng.sample(cells, 2)
            holes = {cell for cell in cells if cell not in (start, goal) and rng.random() > p_frozen}
            if has_path(holes, (size, size), start, goal):
                break
        else:
            raise ValueError(f"no solvable {size}x{size} lake with p_frozen={p_frozen}; raise p_frozen")
        self.shape, self.holes, self.goal, self.player = (size, size), holes, goal, start

    def _load(self, grid: list[list[str]]) -> None:
        cells = [((r, c), sym) for r, row in enumerate(grid) for c, sym in enumerate(row)]
        self.player = check_one("player (P, X or W)", [cell for cell, sym in cells if sym in "PXW"])
        self.goal = check_one("goal (G or W)", [cell for cell, sym in cells if sym in "GW"])
        self.shape = (len(grid), len(grid[0]))
        self.holes = {cell for cell, sym in cells if sym in "OX"}

    def _apply(self, action: str) -> tuple[float, bool]:
        if self.slip_prob and self.rng.random() < self.slip_prob:
            sideways = ["left", "right"] if action in ("up", "down") else ["up", "down"]
            action = self.rng.choice(sideways)
        dr, dc = MOVES[action]
        r, c = self.player[0] + dr, self.player[1] + dc
        if 0 <= r < self.shape[0] and 0 <= c < self.shape[1]:
            self.player = (r, c)
        if self.player == self.goal:
            return 1.0, True
        return 0.0, self.player in self.holes

    def render(self) -> list[list[str]]:
        grid = [["_"] * self.shape[1] for _ in range(self.shape[0])]
        for r, c in self.holes:
            grid[r][c] = "O"
        grid[self.goal[0]][self.goal[1]] = "G"
        r, c = self.player
        grid[r][c] = {"O": "X", "G": "W"}.get(grid[r][c], "P")
        return grid

    def surroundings(self) -> str:
        """E.g. "up edge, down ice, left hole, right ice; goal 2 down 3 right"."""
        r, c = self.player
        near = ", ".join(f"{move} {self._cell_word((r + dr, c + dc))}" for move, (dr, dc) in MOVES.items())
        return f"{near}; goal {offset_words(self.goal[0] - r, self.goal[1] - c)}"

    def _cell_word(self, cell: Cell) -> str:
        if not (0 <= cell[0] < self.shape[0] and 0 <= cell[1] < self.shape[1]):
            return "edge"
        return "goal" if cell == self.goal else "hole" if cell in self.holes else "ice"
