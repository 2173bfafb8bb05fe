"""Create the demo team, the demo user (its admin) and, if available, the demo catalog; idempotent. Kept in
the runs app, which may import every catalog app the demo catalog fills (accounts may not)."""

import importlib.util
import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from workbench.accounts.models import Membership, Role, Team

DEMO_TEAM = "Demo team"
DEMO_USERNAME = "demo"


class Command(BaseCommand):
    help = "Create the demo team, user and catalog (safe to run again)."

    def handle(self, *args, **options):
        password = os.environ.get("DEMO_PASSWORD", "demo-workbench")
        with transaction.atomic():
            team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
            user, created = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
            if created:
                user.set_password(password)
                user.save()
            Membership.objects.update_or_create(user=user, team=team, defaults={"role": Role.ADMIN})
        if importlib.util.find_spec("workbench.demo_catalog") is not None:
            from workbench.demo_catalog import seed_demo_catalog

            seed_demo_catalog(team=team, user=user)
            self.stdout.write("Demo catalog ready.")
        login = f"{DEMO_USERNAME} / {password}" if created else f"{DEMO_USERNAME} (password unchanged)"
        self.stdout.write(self.style.SUCCESS(f"Demo team {team.name!r}; log in as {login}"))
