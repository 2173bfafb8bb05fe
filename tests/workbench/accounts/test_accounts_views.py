"""Login everywhere, team pages by role, team isolation by URL, team switcher."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.workbench.support.users import PASSWORD
from workbench.accounts.models import Membership

PUBLIC = {"/login/", "/healthz", "/favicon.ico"}  # the icon is asked for before anyone logs in
SAMPLE_UUID = "6f1c2a52-3d3b-4c1e-9a57-0b8e2f7d4c10"  # fixed: every test process must collect the same ids
SAMPLE_ARGS = {"int": "1", "str": "x", "slug": "x", "uuid": SAMPLE_UUID, "path": "x"}


def every_url(patterns=None, prefix: str = "") -> list[str]:
    """One concrete URL per route of every app, converters filled with sample values."""
    urls = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            urls += every_url(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and not route.startswith("^"):
            urls.append("/" + _fill(route))
    return urls


def _fill(route: str) -> str:
    while "<" in route:
        start, end = route.index("<"), route.index(">")
        converter = route[start + 1 : end].split(":")[0] if ":" in route[start:end] else "str"
        route = route[:start] + SAMPLE_ARGS.get(converter, "1") + route[end + 1 :]
    return route


@pytest.mark.parametrize("url", [u for u in every_url() if u not in PUBLIC and not u.startswith("/admin/")])
def test_every_page_requires_login(client, db, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_health_login_and_icon_are_public(client, db):
    assert client.get("/healthz").status_code == 200
    assert client.get("/login/").status_code == 200
    icon = client.get("/favicon.ico")
    assert icon.status_code in (301, 302) and not icon["Location"].startswith("/login/")


def test_admin_site_requires_staff(client_for, member):
    response = client_for(member).get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_real_login_then_home_shows_the_current_team(client, member, team):
    response = client.post("/login/", {"username": member.username, "password": PASSWORD}, follow=True)
    assert response.status_code == 200
    assert f"Current team: <strong>{team.name}</strong>" in response.content.decode()


def test_team_page_of_another_team_is_404(client_for, outsider, team):
    assert client_for(outsider).get(f"/teams/{team.pk}/").status_code == 404


def test_admin_sees_member_management_and_a_member_does_not(client_for, admin, member, team):
    assert "Invite a member" in client_for(admin).get(f"/teams/{team.pk}/").content.decode()
    assert "Invite a member" not in client_for(member).get(f"/teams/{team.pk}/").content.decode()


def test_an_outsider_cannot_change_roles_by_membership_id(client_for, outsider, member, team):
    membership = Membership.objects.get(user=member, team=team)
    response = client_for(outsider).post(f"/teams/members/{membership.pk}/role/", {"role": "viewer"})
    assert response.status_code == 404
    membership.refresh_from_db()
    assert membership.role == "member"


def test_viewer_cannot_start_a_job_and_member_can(client_for, viewer, member):
    assert client_for(viewer).post("/status/check/cpu/").status_code == 403
    assert client_for(member).post("/status/check/cpu/").status_code == 200


def test_switching_to_a_team_one_is_not_in_is_404(client_for, member, other_team):
    assert client_for(member).post("/teams/switch/", {"team": other_team.pk}).status_code == 404


def test_switching_teams_changes_the_current_team(client_for, member, team, other_team):
    Membership.objects.create(user=member, team=other_team, role="viewer")
    client = client_for(member)
    response = client.post("/teams/switch/", {"team": other_team.pk, "next": "/teams/"})
    assert response["Location"] == "/teams/"
    assert client.get("/").context["current_team"] == other_team


def test_switch_ignores_an_offsite_next_url(client_for, member, team):
    response = client_for(member).post("/teams/switch/", {"team": team.pk, "next": "https://evil.example/"})
    assert response["Location"] == "/"


def test_creating_a_team_makes_it_current(client_for, make_user):
    client = client_for(make_user("loner"))
    client.post("/teams/", {"name": "solo"})
    assert client.get("/").context["current_team"].name == "solo"
