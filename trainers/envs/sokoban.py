"""Sokoban as in RAGEN: push every box onto a target. Levels are made by playing backwards from a
solved state (pulling boxes off their targets, as gym-sokoban does), so every level is solvable."""

from __future__ import annotations

import random
from typing import Any, TypeVar

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
Boxes = TypeVar("Boxes", set[Cell], frozenset[Cell])
STEP_PENALTY, BOX_ON, BOX_OFF, SOLVED = -0.1, 1.0, -1.0, 10.0  # gym-sokoban's reward scheme
MAX_REVERSE_STEPS = 1000  # gym-sokoban's levels play 300 steps backwards; more only costs generation time


def move(floor: set[Cell], boxes: Boxes, player: Cell, action: str) -> tuple[Cell, Boxes] | None:
    """The player and the boxes after `action`, a box ahead pushed one cell on; None when nothing moves
    (a wall ahead, or a box there with a wall or another box behind it)."""
    dr, dc = MOVES[action]
    ahead, beyond = (player[0] + dr, player[1] + dc), (player[0] + 2 * dr, player[1] + 2 * dc)
    if ahead not in floor:
        return None
    if ahead not in boxes:
        return ahead, boxes
    if beyond not in floor or beyond in boxes:
        return None
    return ahead, (boxes - {ahead}) | {beyond}


@ENVIRONMENTS.register("sokoban")
class Sokoban(Environment):
    """Rewards per step: -0.1, +1 for a box pushed onto a target, -1 off one, +10 when all are placed."""

    name = "sokoban"
    legend = "# wall, _ floor, O target, X box, √ box on target, P player, S player on target"
    symbols = "#_OX√PS"

    def __init__(self, *, max_steps: int = 40, **level_defaults: Any) -> None:
        super().__init__(
            max_steps=max_steps, **{"size": 6, "num_boxes": 1, "reverse_steps": 60, **level_defaults}
        )

    # --- level generation ----------------------------------------------------------------------
    def _generate(
        self, rng: random.Random, *, size: int = 6, num_boxes: int = 1, reverse_steps: int = 60
    ) -> None:
        check_whole("size", size, 4, MAX_SIDE)  # walls all round, so 4 leaves a 2x2 room
        check_whole("num_boxes", num_boxes, 1, (size - 2) ** 2 - 2)  # room for a player and a free cell
        check_whole("reverse_steps", reverse_steps, 1, MAX_REVERSE_STEPS)
        for _ in range(1000):
            floor = self._carve_room(rng, size)
            if len(floor) < num_boxes + 2:
                continue
            cells = sorted(floor)
            targets = set(rng.sample(cells, num_boxes))
            player = rng.choice([c for c in cells if c not in targets])
            self.shape, self.floor, self.targets = (size, size), floor, targets
            best = max((self._play_backwards(rng, player, reverse_steps) for _ in range(8)), key=self._spread)
            if self._spread(best) > 0:
                self.boxes, self.player = best
                return
        raise ValueError("could not generate a Sokoban level; try a larger size or fewer boxes")

    @staticmethod
    def _carve_room(rng: random.Random, size: int) -> set[Cell]:
        """A random walk inside the border walls; the cells it visits are floor."""
        r, c = rng.randrange(1, size - 1), rng.randrange(1, size - 1)
        floor = {(r, c)}
        for _ in range(size * size):
            dr, dc = rng.choice(list(MOVES.values()))
            if 1 <= r + dr < size - 1 and 1 <= c + dc < size - 1:
                r, c = r + dr, c + dc
                floor.add((r, c))
        return floor

    def _play_backwards(self, rng: random.Random, player: Cell, steps: int) -> tuple[set[Cell], Cell]:
        """Reverse moves: step away, maybe pulling the box behind; each is a legal forward push."""
        boxes = set(self.targets)
        for _ in range(steps):
            dr, dc = rng.choice(list(MOVES.values()))
            r, c = player
            ahead, behind = (r + dr, c + dc), (r - dr, c - dc)
            if ahead not in self.floor or ahead in boxes:
                continue
            if behind in boxes and rng.random() < 0.8:
                boxes.remove(behind)
                boxes.add((r, c))
            player = ahead
        return boxes, player

    def _spread(self, candidate: tuple[set[Cell], Cell]) -> int:
        """How far the boxes ended from the targets (gym-sokoban keeps the hardest reverse play)."""
        boxes = candidate[0]
        return sum(min(abs(b[0] - t[0]) + abs(b[1] - t[1]) for t in self.targets) for b in boxes)

    def _load(self, grid: list[list[str]]) -> None:
        cells = [((r, c), sym) for r, row in enumerate(grid) for c, sym in enumerate(row)]
        self.player = check_one("player (P or S)", [cell for cell, sym in cells if sym in "PS"])
        self.targets = {cell for cell, sym in cells if sym in "O√S"}
        self.boxes = {cell for cell, sym in cells if sym in "X√"}
        if not 1 <= len(self.boxes) <= len(self.targets):
            raise ValueError(f"grid must hold at least one box and a target for each, not "
                             f"{len(self.boxes)} boxes and {len(self.targets)} targets")  # fmt: skip
        self.shape = (len(grid), len(grid[0]))
        self.floor = {cell for cell, sym in cells if sym != "#"}

    # --- play -------------------------------------------------------------------------------------
    def _apply(self, action: str) -> tuple[float, bool]:
        reward = STEP_PENALTY
        moved = move(self.floor, self.boxes, self.player, action)
        if moved is None:
            return reward, False
        self.player, boxes = moved
        onto, off = boxes - self.boxes, self.boxes - boxes  # a pushed box's new and old cell, or nothing
        reward += len(onto & self.targets) * BOX_ON + len(off & self.targets) * BOX_OFF
        self.boxes = boxes
        solved = self.boxes == self.targets
        return reward + (SOLVED if solved else 0.0), solved

    def render(self) -> list[list[str]]:
        grid = [["#"] * self.shape[1] for _ in range(self.shape[0])]
        for r, c in self.floor:
            grid[r][c] = "_"
        for r, c in self.targets:
            grid[r][c] = "O"
        for r, c in self.boxes:
            grid[r][c] = "√" if (r, c) in self.targets else "X"
        r, c = self.player
        grid[r][c] = "S" if (r, c) in self.targets else "P"
        return grid

    def surroundings(self) -> str:
        """E.g. "up wall, down box then floor, left floor, right target; box 1 down, to target 1 left,
        push left from 1 down 1 right": each direction's cell (and the cell a box there would be pushed
        into), then every box off a target, from the player, the nearest free target from that box, and
        the push that moves the box toward it with the cell to push from (see `_push_toward`)."""
        r, c = self.player
        near = []
        for action, (dr, dc) in MOVES.items():
            ahead = (r + dr, c + dc)
            word = self._cell_word(ahead)
            if ahead in self.boxes:
                word += f" then {self._cell_word((r + 2 * dr, c + 2 * dc))}"
            near.append(f"{action} {word}")
        free = sorted(self.targets - self.boxes)
        # moves from the player to every cell it can walk to without pushing a box
        walk = grid_distances(self.player, lambda cell: cell in self.floor and cell not in self.boxes)
        boxes = []
        for box in sorted(self.boxes - self.targets):
            target = min(free, key=lambda t: abs(t[0] - box[0]) + abs(t[1] - box[1]))
            words = (f"box {offset_words(box[0] - r, box[1] - c)}, to target "
                     f"{offset_words(target[0] - box[0], target[1] - box[1])}")  # fmt: skip
            if push := self._push_toward(box, target, walk):
                action, stand = push
                words += f", push {action} from {offset_words(stand[0] - r, stand[1] - c)}"
            boxes.append(words)
        return "; ".join([", ".join(near), *boxes])

    def _push_toward(self, box: Cell, target: Cell, walk: dict[Cell, int]) -> tuple[str, Cell] | None:
        """A push that moves `box` one cell nearer `target`, and the cell the player pushes it from: of
        the (at most two) such pushes whose far cell is free and no dead corner, and whose standing cell
        the player can walk to (`walk`: moves to each such cell), the nearest. None when there is none.
        The 2x64 policy did not learn the walk round the box from the offsets alone
        (docs/experiments/sokoban.md)."""
        pushes = []
        for action, (dr, dc) in MOVES.items():
            if (target[0] - box[0]) * dr + (target[1] - box[1]) * dc <= 0:
                continue  # not toward the target
            stand, beyond = (box[0] - dr, box[1] - dc), (box[0] + dr, box[1] + dc)
            if beyond in self.floor and beyond not in self.boxes and not self._dead_corner(beyond):
                pushes.append((action, stand))
        reachable = [(walk[stand], action, stand) for action, stand in pushes if stand in walk]
        return min(reachable)[1:] if reachable else None

    def _dead_corner(self, cell: Cell) -> bool:
        """A cell off every target with walls on two perpendicular sides: a box there never moves again."""
        r, c = cell
        walled = {(dr, dc) for dr, dc in MOVES.values() if (r + dr, c + dc) not in self.floor}
        vertical, horizontal = walled & {(-1, 0), (1, 0)}, walled & {(0, -1), (0, 1)}
        return cell not in self.targets and bool(vertical) and bool(horizontal)

    def _cell_word(self, cell: Cell) -> str:
        if cell not in self.floor:
            return "wall"
        if cell in self.boxes:
            return "box on target" if cell in self.targets else "box"
        return "target" if cell in self.targets else "floor"
