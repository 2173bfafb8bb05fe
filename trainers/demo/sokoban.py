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
# Five turns (RAGEN's first Sokoban scripts allowed 5) for solutions of 2.5 moves on average: a wasted
# move costs a play often enough to leave RL something to remove (a mover reading the line solves 0.985
# of held-out rooms with 5 turns, 0.87 / 0.795 when 20% / 30% of its moves are wasted; 0.99+ with 10)
MAX_TURNS = 5
# A turn without a move costs more than any play that moves and fails (at worst -0.1 per turn, as a box
# that ends off its target has gained and lost the same): at -0.5 a play that broke its first call and
# ended beat a 12-move failure (-1.2), and GiGPO taught every play to give up (success 0.11 -> 0 by
# step 10 on 6x6 rooms). With nothing charged, malformed calls per play rose 0.27 -> 4.7
INVALID_ACTION_PENALTY = STEP_PENALTY * MAX_TURNS - 0.5
# The imperfect plays waste moves (into a wall, or against a box that cannot move) and never stray: random
# moves (the lakes' mistakes) in one play in two spoilt the policy's reading of rooms at higher rates and
# cost too few plays at lower ones (README). Perfect plays first, for 480 of the 600 SFT steps, so that
# the reading forms before the mistakes come in; with the mistakes from the start greedy success fell to
# 0.36-0.78
EXPERTS = {"imperfect": 1.0, "slip": 0.35, "mistake": "wasted", "sft_perfect_steps": 480}
# On the grid alone neither 2x64 nor 4x128 read unseen rooms (a random mover's success). With the
# surroundings line the 2x64 policy does (greedy held-out 0.66, 4x128: 0.73 at twice the time); 600 SFT
# steps at 3e-3 did as well as 1000 at 1e-3 here (greedy 0.64), in about half the time
# RL: 90 steps. At 40 the rise was +11.5 to +19.5 (met on 1-2 seeds of 3); at 60 +12 to +26.5 on seeds
# 0-4, short of 15 once (seed 0's GiGPO, still rising); at 90 +19 to +29.5 on seeds 0-4 (README)
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
