"""The recipes the new-run form starts from: the demo's, which learns within minutes on a CPU worker and
pins the team's demo catalog for the user, then the papers' presets (trainers.config.presets), which set
the config only: their data, template and reward are the user's to pin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainers.workbench_api import DEMO_LEARNING_RUN, PRESETS, preset_config, validate_config
from workbench.accounts.models import Team
from workbench.demo_catalog import DemoCatalogMissing, demo_run_pins

DEMO_RECIPE = "demo_calculator"
DEMO_TITLE = (
    "The calculator demo: SFT on tool-using experts, then GRPO; learns within minutes on a CPU worker, with"
    " the demo catalog pinned"
)


@dataclass(frozen=True)
class RecipeStart:
    """What the form opens with for a recipe: its config, the catalog pins it brings, and a note."""

    config: dict[str, Any]
    pins: dict[str, Any]
    note: str = ""


def recipe_choices() -> list[tuple[str, str]]:
    """(name, one-line description) of every recipe, the demo's first."""
    return [(DEMO_RECIPE, DEMO_TITLE), *((name, preset.title) for name, preset in PRESETS.items())]


def recipe_start(name: str, team: Team) -> RecipeStart | None:
    """The recipe's start for this team; None when no recipe has that name."""
    if name == DEMO_RECIPE:
        config = validate_config(DEMO_LEARNING_RUN).model_dump(mode="json")
        try:
            return RecipeStart(config, demo_run_pins(team))
        except DemoCatalogMissing as exc:
            missing = f"Pin a dataset to launch: {exc} (an admin runs manage.py seed_demo)."
            return RecipeStart(config, {}, missing)
    if name in PRESETS:
        return RecipeStart(preset_config(name).model_dump(mode="json"), {})
    return None
