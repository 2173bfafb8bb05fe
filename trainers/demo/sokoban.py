"""Multi-turn demo: Sokoban through the `sokoban` tool, SFT on breadth-first-search solutions (some of them
imperfect), then GRPO or GiGPO on gym-sokoban's rewards. Small rooms, one box by default. The recipe
itself is `trainers.demo.multiturn`.
"""

from __future__ import annotations

from collections import deque

from trainers.demo.multiturn import Game
from trainers.envs.base import MOVES, Environment
from trainers.envs.sokoban import STEP_PENALTY, Sokoban, move

QUESTION = "Push every box X onto a target O. Move the player P with the sokoban tool."
# The recipe's settings and what was measured for each: docs/experiments/sokoban.md
MAX_TURNS = 5  # few enough that a wasted move costs a play
# A turn without a move costs more than any play that moves and fails (at worst -0.1 per turn)
INVALID_ACTION_PENALTY = STEP_PENALTY * MAX_TURNS - 0.5
# Every play imperfect: its mistakes are wasted moves (into a wall, or against a box that cannot move), and
# the first 480 of the 600 SFT steps train on perfect plays, so that the reading forms before the mistakes
EXPERTS = {"imperfect": 1.0, "slip": 0.35, "mistake": "wasted", "sft_perfect_steps": 480}
SETTINGS = {"sft_steps": 600, "sft_lr": 3e-3, "rl_steps": 90, **EXPERTS}

State = tuple[tuple[int, int], frozenset]


def solve(env: Environment, max_states: int = 100_000) -> list[str] | None:
    """Breadth-first search over (player, boxes): the moves of a shortest solution, None if none."""
    assert isinstance(env, Sokoban)
    start: State = (env.player, frozenset(env.boxes))
    previous: dict[State, tuple[State, str] | None] = {start: None}
    frontier, end = deque([start]), None
    while frontier and len(previous) < max_states:
        state = frontier.popleft()
        player, boxes = state
        if boxes == env.targets:
            end = state
            break
        for action in MOVES:
            nxt = move(env.floor, boxes, player, action)
            if nxt is not None and nxt not in previous:
                previous[nxt] = (state, action)
                frontier.append(nxt)
    if end is None:
        return None
    actions, state = [], end
    while (link := previous[state]) is not None:
        state, action = link
        actions.append(action)
    return actions[::-1]


def room(start: str) -> str:
    """The room, its targets and boxes, without the player (P on floor, S on a target)."""
    return start.replace("P", "_").replace("S", "O")


def sokoban_game(size: int = 5, num_boxes: int = 1, *, describe: bool = True) -> Game:
    """Random rooms inside a `size` x `size` wall; a play succeeds when no box is off a target.
    `describe` adds the surroundings line to every observation (see `Environment`)."""
    level = {"size": size, "num_boxes": num_boxes, "reverse_steps": 20}
    config = {"describe": describe, "invalid_action_penalty": INVALID_ACTION_PENALTY}
    return Game("sokoban", QUESTION, level, MAX_TURNS, solve, solved, symbols="#_OX√PS\n", layout=room,
                tool_config=config)  # fmt: skip


def solved(state: str) -> bool:
    """No box X left off a target in the grid (the surroundings line is lower case)."""
    return "X" not in state
