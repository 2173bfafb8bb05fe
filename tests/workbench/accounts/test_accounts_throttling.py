"""Login throttling: after AXES_FAILURE_LIMIT failures for one username from one address, that pair is
refused, the right password included, on the login page and the admin's, until the cool-off has passed.
"""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.test.client import RequestFactory

from tests.workbench.support.users import PASSWORD
from tests.workbench.support.worker import REPO_ROOT
from workbench.accounts.throttling import client_ip

LOGIN, ADMIN_LOGIN = "/login/", "/admin/login/"


def attempt(client: Client, url: str, username: str, password: str, **extra):
    return client.post(url, {"username": username, "password": password, "next": "/"}, **extra)


def fail(client: Client, url: str, username: str, times: int, **extra) -> list[int]:
    """Log in with a wrong password `times` times; the status of each answer."""
    return [attempt(client, url, username, "wrong", **extra).status_code for _ in range(times)]


def logged_in(client: Client) -> bool:
    return client.get("/").status_code == 200


def settings_in_subprocess(env: dict, *names: str) -> list[str]:
    """The named settings as a fresh process with env loads them."""
    code = "import django; django.setup(); from django.conf import settings; "
    code += f"print(*(getattr(settings, name) for name in {names!r}), sep='|')"
    keep = {k: v for k, v in os.environ.items() if not k.startswith("AXES_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=keep | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split("|")


@pytest.fixture
def staff(admin):
    admin.is_staff = True
    admin.save()
    return admin


def test_the_login_after_the_limit_is_refused_even_with_the_right_password(member):
    client = Client()
    statuses = fail(client, LOGIN, member.username, settings.AXES_FAILURE_LIMIT)
    assert statuses == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]  # the form again, then the lock
    response = attempt(client, LOGIN, member.username, PASSWORD)
    assert response.status_code == 429
    page = response.content.decode()
    assert (
        'id="locked-out"' in page and f"{settings.AXES_FAILURE_LIMIT} logins as <strong>ada</strong>" in page
    )
    assert "locked for 15 minutes" in page
    assert not logged_in(client)


def test_below_the_limit_the_right_password_works_and_starts_the_count_again(member):
    client = Client()
    assert set(fail(client, LOGIN, member.username, settings.AXES_FAILURE_LIMIT - 1)) == {200}
    assert attempt(client, LOGIN, member.username, PASSWORD).status_code == 302
    client.post("/logout/")
    assert set(fail(client, LOGIN, member.username, settings.AXES_FAILURE_LIMIT - 1)) == {200}
    assert attempt(client, LOGIN, member.username, PASSWORD).status_code == 302


def test_admin_login_failures_are_counted_too(staff):
    client = Client()
    assert fail(client, ADMIN_LOGIN, staff.username, settings.AXES_FAILURE_LIMIT)[-1] == 429
    assert attempt(client, ADMIN_LOGIN, staff.username, PASSWORD).status_code == 429
    assert attempt(client, LOGIN, staff.username, PASSWORD).status_code == 429
    assert client.get("/admin/").status_code == 302  # still the admin's login page


def test_failures_on_both_login_pages_add_up(staff):
    client = Client()
    fail(client, LOGIN, staff.username, settings.AXES_FAILURE_LIMIT - 1)
    fail(client, ADMIN_LOGIN, staff.username, 1)
    assert attempt(client, LOGIN, staff.username, PASSWORD).status_code == 429


def test_the_lock_holds_one_username_from_one_address(member, admin):
    fail(Client(), LOGIN, member.username, settings.AXES_FAILURE_LIMIT)
    assert attempt(Client(), LOGIN, admin.username, PASSWORD).status_code == 302  # another user, same address
    other_address = attempt(Client(), LOGIN, member.username, PASSWORD, REMOTE_ADDR="192.0.2.7")
    assert other_address.status_code == 302


def test_the_lock_lifts_after_the_cool_off(member):
    client = Client()
    fail(client, LOGIN, member.username, settings.AXES_FAILURE_LIMIT)
    assert attempt(client, LOGIN, member.username, PASSWORD).status_code == 429
    # Each failure, the refused attempt included, restarts the wait; age them all past it.
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16)
    )
    assert attempt(client, LOGIN, member.username, PASSWORD).status_code == 302


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(settings, member):
    settings.TRUSTED_PROXY_COUNT = 1
    client = Client(REMOTE_ADDR="10.0.0.1")  # the proxy
    for spoofed in range(settings.AXES_FAILURE_LIMIT):  # what a client puts in the header is not trusted
        forwarded = f"198.51.100.{spoofed}, 203.0.113.9"
        attempt(client, LOGIN, member.username, "wrong", HTTP_X_FORWARDED_FOR=forwarded)
    assert (
        attempt(client, LOGIN, member.username, PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.9").status_code
        == 429
    )
    elsewhere = attempt(client, LOGIN, member.username, PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert elsewhere.status_code == 302


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [(0, "198.51.100.1", "10.0.0.1"), (1, "", "10.0.0.1"), (2, "203.0.113.9, 10.0.0.2", "203.0.113.9")],
)
def test_client_ip(settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


@pytest.mark.slow
def test_the_limit_and_cool_off_come_from_the_environment():
    assert settings_in_subprocess({}, "AXES_FAILURE_LIMIT", "AXES_COOLOFF_TIME") == ["5", "0:15:00"]
    env = {"AXES_FAILURE_LIMIT": "3", "AXES_COOLOFF_MINUTES": "30"}
    assert settings_in_subprocess(env, "AXES_FAILURE_LIMIT", "AXES_COOLOFF_TIME") == ["3", "0:30:00"]
