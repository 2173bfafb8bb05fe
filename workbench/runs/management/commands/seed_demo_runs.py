"""Launch the demo runs (idempotent), pinned to the demo catalog: SFT warm start then GRPO, in two versions
that finish by themselves within minutes on a CPU worker:

- one that learns: reward, well-formed calculator calls and correct answers climb, and the echo-trap
  detector stays quiet;
- one driven to collapse (a learning rate that keeps climbing), to show what an echo-trap alert looks like.

`make run`'s worker trains both at once (a core each); the learning run is launched last, so it heads
the runs list."""

from django.core.management.base import BaseCommand, CommandError

from trainers.workbench_api import DEMO_COLLAPSE_RUN, DEMO_LEARNING_RUN
from workbench import demo_catalog
from workbench.accounts.models import Team
from workbench.datasets.models import Dataset
from workbench.prompts.models import PromptTemplate
from workbench.rewards.models import RewardDefinition
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.toolschemas.models import ToolSchema

LEARNING = "Demo: calculator, SFT then GRPO"
COLLAPSE = "Demo: collapse (echo-trap alert)"
DEMO_RUNS = {
    COLLAPSE: (DEMO_COLLAPSE_RUN, "The same start, then a learning rate that climbs 2.5e-4 per step: the"
               " policy falls apart and the echo-trap detector raises alerts."),
    LEARNING: (DEMO_LEARNING_RUN, "The calculator demo's recipe: SFT on the tool-using experts, then on the"
               " whole mix, then GRPO with a small KL: tool calls, correct answers and reward rise."),
}  # fmt: skip


def demo_pins(team: Team) -> dict:
    """The latest versions of the demo catalog items the demo runs pin (seed_demo creates them)."""

    def latest(model, name):
        item = model.objects.filter(team=team, name=name, is_deleted=False).first()
        if item is None:
            raise CommandError(f"run seed_demo first: {name!r} is missing from {team.name!r}")
        return item.latest_version()

    return {
        "dataset_version": latest(Dataset, demo_catalog.DATASET_NAME),
        "sft_dataset_version": latest(Dataset, demo_catalog.SFT_DATASET_NAME),
        "prompt_version": latest(PromptTemplate, demo_catalog.TEMPLATE_NAME),
        "reward_version": latest(RewardDefinition, demo_catalog.TOOL_REWARD_NAME),
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
        for name, (config, notes) in DEMO_RUNS.items():
            if Run.objects.filter(team=team_obj, name=name).exists():
                continue
            run = run_create(
                team=team_obj, user=user, name=name, config=config, queue="cpu", notes=notes, tags=["demo"],
                **pins,
            )  # fmt: skip
            self.stdout.write(f"Launched {run.name} (run {run.pk}).")
