"""Launch the demo runs (idempotent), pinned to the demo catalog: SFT warm start then GRPO, in two versions
that finish by themselves within minutes on a CPU worker:

- one that learns: reward, well-formed calculator calls and correct answers climb, and the echo-trap
  detector stays quiet;
- one driven to collapse (a learning rate that keeps climbing), to show what an echo-trap alert looks like.

`make run`'s worker trains both at once (a core each); the learning run is launched last, so it heads
the runs list."""

from django.core.management.base import BaseCommand, CommandError

from trainers.workbench_api import DEMO_COLLAPSE_RUN, DEMO_LEARNING_RUN
from workbench.accounts.models import Team
from workbench.demo_catalog import DemoCatalogMissing, demo_run_pins
from workbench.runs.models import Run
from workbench.runs.services import run_create

LEARNING = "Demo: calculator, SFT then GRPO"
COLLAPSE = "Demo: collapse (echo-trap alert)"
DEMO_RUNS = {
    COLLAPSE: (DEMO_COLLAPSE_RUN, "The same start, then a learning rate that climbs 2.5e-4 per step: the"
               " policy falls apart and the echo-trap detector raises alerts."),
    LEARNING: (DEMO_LEARNING_RUN, "The calculator demo's recipe: SFT on the tool-using experts, then on the"
               " whole mix, then GRPO with a small KL: tool calls, correct answers and reward rise."),
}  # fmt: skip


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
        try:
            pins = demo_run_pins(team_obj)
        except DemoCatalogMissing as exc:
            raise CommandError(f"run seed_demo first: {exc}") from exc
        for name, (config, notes) in DEMO_RUNS.items():
            if Run.objects.filter(team=team_obj, name=name).exists():
                continue
            run = run_create(
                team=team_obj, user=user, name=name, config=config, queue="cpu", notes=notes, tags=["demo"],
                **pins,
            )  # fmt: skip
            self.stdout.write(f"Launched {run.name} (run {run.pk}).")
