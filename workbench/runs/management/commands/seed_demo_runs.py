"""Launch the demo runs (idempotent): a short one that finishes and a long one that stays live, both
pinned to the demo catalog, so a newcomer sees every runs page with data once the worker of `make run`
picks them up in order."""

from django.core.management.base import BaseCommand, CommandError

from workbench import demo_catalog
from workbench.accounts.models import Team
from workbench.datasets.models import Dataset
from workbench.prompts.models import PromptTemplate
from workbench.rewards.models import RewardDefinition
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.toolschemas.models import ToolSchema

DEMO_RUNS = {"Demo: finished run": 12, "Demo: live run": 5000}  # name -> training steps

# The bundled tiny model, 4 prompts x 4 samples, short turns: seconds per step on a CPU.
DEMO_CONFIG = {
    "rollout": {"prompts_per_step": 4, "samples_per_prompt": 4},
    "limits": {"max_new_tokens_per_turn": 24, "max_turns": 3},
    "checkpoint": {"every_steps": 5},
}


def demo_pins(team: Team) -> dict:
    """The latest versions of the demo catalog items (seed_demo creates them)."""

    def latest(model, name):
        item = model.objects.filter(team=team, name=name, is_deleted=False).first()
        if item is None:
            raise CommandError(f"run seed_demo first: {name!r} is missing from {team.name!r}")
        return item.latest_version()

    return {
        "dataset_version": latest(Dataset, demo_catalog.DATASET_NAME),
        "prompt_version": latest(PromptTemplate, demo_catalog.TEMPLATE_NAME),
        "reward_version": latest(RewardDefinition, demo_catalog.REWARD_NAME),
        "tool_versions": [latest(ToolSchema, "calculator")],
    }


class Command(BaseCommand):
    help = "Launch the demo runs for the demo team (skips runs that already exist)."

    def add_arguments(self, parser):
        parser.add_argument("--team", default="Demo team")
        parser.add_argument("--username", default="demo")

    def handle(self, *args, team: str, username: str, **options):
        team_obj = Team.objects.filter(name=team).first()
        user = team_obj.members.filter(username=username).first() if team_obj else None
        if user is None:
            raise CommandError(f"run seed_demo first: no user {username!r} in team {team!r}")
        pins = demo_pins(team_obj)
        for name, steps in DEMO_RUNS.items():
            if Run.objects.filter(team=team_obj, name=name).exists():
                continue
            config = {**DEMO_CONFIG, "training": {"steps": steps}}
            run = run_create(
                team=team_obj, user=user, name=name, config=config, queue="cpu", tags=["demo"], **pins
            )
            self.stdout.write(f"Launched {run.name} (run {run.pk}).")
