"""Multi-turn demo (RAGEN): FrozenLake through the `frozenlake` tool, SFT on shortest-path experts (some of
them imperfect), then GRPO or GiGPO on the environment reward. Each move is one assistant turn, so GiGPO
has step groups. The recipe itself is `trainers.demo.multiturn`.
"""

from __future__ import annotations

from collections import deque

from trainers.demo.multiturn import Game
from trainers.demo.settings import SettingsError
from trainers.envs.base import MOVES, Environment
from trainers.envs.frozenlake import FrozenLake

QUESTION = "Walk the player P to the goal G without stepping into a hole O. Move with the frozenlake tool."
MAX_TURNS = 8  # a shortest 4x4 corner-to-corner path is 6 moves; detours round holes take 8
# Every 6x6 map is new, and 2000 plays (600 SFT steps at 3e-3) left the policy reading them poorly
# (greedy held-out success 0.30); with 3000 plays and the recipe's SFT (1000 steps at 1e-3): 0.40
LARGE_LAKE_SETTINGS = {"n_experts": 3000}
# The sides the demo plays: 2x2 lakes make three maps, too few to hold some out; the longest 6x6 play
# (12 turns) is 763 of the policy's 1024 positions, and a 7x7 lake needs 12 moves without a detour
SIDES = range(3, 7)


def shortest_path(env: Environment) -> list[str]:
    """Breadth-first search over safe cells; the actions of a shortest path from player to goal."""
    assert isinstance(env, FrozenLake)
    start, goal = env.player, env.goal
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    frontier = deque([start])
    while frontier:
        cell = frontier.popleft()
        if cell == goal:
            break
        for action, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            inside = 0 <= nxt[0] < env.shape[0] and 0 <= nxt[1] < env.shape[1]
            if inside and nxt not in env.holes and nxt not in previous:
                previous[nxt] = (cell, action)
                frontier.append(nxt)
    actions, cell = [], goal
    while previous.get(cell) is not None:
        cell, action = previous[cell]
        actions.append(action)
    return actions[::-1]


def lake_map(start: str) -> str:
    """The lake without its player (the player starts on frozen ice)."""
    return start.replace("P", "_")


def lake_game(size: int = 4, *, describe: bool = True) -> Game:
    """Random `size` x `size` lakes (no slipping); a play succeeds when the player stands on the goal.
    `describe` adds the surroundings line to every observation (see `Environment`)."""
    if size not in SIDES:
        raise SettingsError(f"FrozenLake's side must be from {SIDES[0]} to {SIDES[-1]}, not {size}")
    level = {"size": size, "corners": True}
    turns = MAX_TURNS if size <= 4 else 12
    return Game("frozenlake", QUESTION, level, turns, shortest_path, on_goal, layout=lake_map,
                tool_config={"describe": describe})  # fmt: skip


def on_goal(state: str) -> bool:
    """The player W stands on the goal in the grid (the surroundings line is lower case)."""
    return "W" in state
