"""The multi-turn games by name, with their recipes' settings: what the demo command and the studies run."""

from __future__ import annotations

from typing import Any

from trainers.demo.frozenlake import LARGE_LAKE_SETTINGS, lake_game
from trainers.demo.multiturn import Game, MultiTurnSettings
from trainers.demo.sokoban import SETTINGS as SOKOBAN_SETTINGS
from trainers.demo.sokoban import sokoban_game


def multiturn_recipe(
    env: str, size: int = 4, *, describe: bool = True, **given: Any
) -> tuple[Game, MultiTurnSettings]:
    """`env`'s game (FrozenLake is `size` x `size`; `describe`: the surroundings line) and its settings:
    the game's defaults, then `given`."""
    if env == "sokoban":
        game = sokoban_game(describe=describe)
        return game, MultiTurnSettings(env=env, **with_curriculum_share(SOKOBAN_SETTINGS, given))
    defaults = LARGE_LAKE_SETTINGS if size > 4 else {}
    return lake_game(size, describe=describe), MultiTurnSettings(env=env, **{**defaults, **given})


def with_curriculum_share(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`defaults` then `given`; SFT steps given without `sft_perfect_steps` keep the recipe's share of
    perfect-play steps (480 of 600 becomes 80 of 100), so a shorter SFT still ends on the mistakes."""
    settings = {**defaults, **given}
    if "sft_steps" in given and "sft_perfect_steps" not in given and defaults.get("sft_perfect_steps"):
        share = defaults["sft_perfect_steps"] / defaults["sft_steps"]
        settings["sft_perfect_steps"] = round(share * given["sft_steps"])
    return settings
