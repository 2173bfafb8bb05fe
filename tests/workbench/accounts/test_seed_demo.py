"""seed_demo (run by `make run` every time) creates the demo team, admin user and catalog once."""

from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from workbench.accounts.models import Membership, Team
from workbench.datasets.models import Dataset
from workbench.toolschemas.models import ToolSchema


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_creates_an_admin_demo_user_who_can_log_in(db, client):
    output = seed()
    assert "log in as demo / demo-workbench" in output
    assert Membership.objects.get(user__username="demo", team__name="Demo team").role == "admin"
    response = client.post("/login/", {"username": "demo", "password": "demo-workbench"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_seed_demo_twice_creates_nothing_twice(db):
    seed()
    counts = (Team.objects.count(), get_user_model().objects.count(), Dataset.objects.count())
    second = seed()
    assert (Team.objects.count(), get_user_model().objects.count(), Dataset.objects.count()) == counts
    assert "password unchanged" in second
    assert ToolSchema.objects.filter(is_deleted=False).exists()
