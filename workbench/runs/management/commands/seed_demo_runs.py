"""Launch the demo runs (idempotent): a short one that finishes and a long one that stays live, so a
newcomer sees every runs page with data once the worker of `make run` picks them up in order."""

import random
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from trainers.demo.arithmetic import make_problem, write_rows
from workbench.accounts.models import Team
from workbench.runs.models import Run
from workbench.runs.services import run_create

DEMO_RUNS = {"Demo: finished run": 12, "Demo: live run": 5000}  # name -> training steps


def demo_config(train_path: Path, steps: int) -> dict:
    """The bundled tiny model with the calculator on arithmetic problems: seconds per step on a CPU."""
    return {
        "tools": [{"name": "calculator"}],
        "rollout": {"prompts_per_step": 4, "samples_per_prompt": 4},
        "limits": {"max_new_tokens_per_turn": 24, "max_turns": 3},
        "training": {"steps": steps},
        "checkpoint": {"every_steps": 5},
        "data": {"train_path": str(train_path)},
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
        path = Path(settings.VAR_DIR) / "demo" / "arithmetic-train.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        write_rows([make_problem(rng, i) for i in range(200)], path)
        for name, steps in DEMO_RUNS.items():
            if Run.objects.filter(team=team_obj, name=name).exists():
                continue
            run = run_create(
                team=team_obj,
                user=user,
                name=name,
                config=demo_config(path, steps),
                queue="cpu",
                tags=["demo"],
            )
            self.stdout.write(f"Launched {run.name} (run {run.pk}).")
