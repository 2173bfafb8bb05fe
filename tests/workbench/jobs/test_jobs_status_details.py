"""The status page's deployment details (database path, broker URL, connection errors) are for staff only."""

import pytest

from workbench.jobs import selectors

DB_PATH = "/srv/workbench/var/secret-db.sqlite3"
BROKER_URL = "redis://:**@broker.internal:6379/0"
BROKER_ERROR = "Error 111 connecting to broker.internal:6379"


@pytest.fixture(autouse=True)
def services(monkeypatch):
    database = {"ok": True, "vendor": "sqlite", "name": DB_PATH}
    monkeypatch.setattr(selectors, "database_status", lambda: database)
    monkeypatch.setattr(
        selectors,
        "broker_status",
        lambda: {"transport": "redis", "url": BROKER_URL, "ok": False, "error": BROKER_ERROR},
    )
    monkeypatch.setattr(selectors, "broker_ping", lambda: {"error": BROKER_ERROR})


@pytest.mark.parametrize("path", ["/status/", "/status/panel/"])
def test_a_member_sees_up_or_down_but_not_where_the_services_are(client_for, member, path):
    body = client_for(member).get(path).content.decode()
    assert "sqlite" in body and "redis" in body and "down" in body
    assert DB_PATH not in body and "broker.internal" not in body


@pytest.mark.parametrize("path", ["/status/", "/status/panel/"])
def test_staff_see_the_database_path_and_broker_url(client_for, member, path):
    member.is_staff = True
    member.save(update_fields=["is_staff"])
    body = client_for(member).get(path).content.decode()
    assert DB_PATH in body and BROKER_URL in body and BROKER_ERROR in body
