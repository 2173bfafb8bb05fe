"""Content-Security-Policy: every page sends a strict policy, and no page needs what it forbids.

The policy allows scripts and styles from our own origin only, so an inline <script>, a style="..."
attribute, an on*= handler or a javascript: URL in a template would silently stop working (and show as
a console error, which the browser tests fail on). These tests find them before a browser does.
"""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from tests.workbench.support.worker import REPO_ROOT

EXPECTED = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'self'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}
# What a strict policy blocks, as it appears in template source or in a rendered page.
FORBIDDEN = {
    "inline script": re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "style attribute": re.compile(r"<[a-z][^>]*\sstyle=", re.I),
    "event handler attribute": re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "htmx eval (hx-on, js:)": re.compile(r"\shx-on\b|\shx-on:|=\s*['\"]js:", re.I),
}


def policy_of(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";") if part.strip())


def violations(html: str) -> list[str]:
    return [f"{name}: {match.group(0)[:80]}" for name, rx in FORBIDDEN.items() for match in rx.finditer(html)]


def template_files() -> list[Path]:
    roots = [REPO_ROOT / "frontend" / "templates", *(REPO_ROOT / "workbench").glob("*/templates")]
    return sorted(path for root in roots for path in root.rglob("*.html"))


def plain_urls(patterns=None, prefix: str = "") -> list[str]:
    """Every route without URL parameters (admin and API routes left out)."""
    urls = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver) and not route.startswith("admin/"):
            urls += plain_urls(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and "<" not in route and "api/" not in route:
            urls.append("/" + route)
    return urls


def test_the_policy_is_the_strict_one():
    assert {k: " ".join(v) for k, v in settings.CONTENT_SECURITY_POLICY["DIRECTIVES"].items()} == EXPECTED


def test_pages_send_the_policy(client, member, client_for):
    assert policy_of(client.get("/login/")) == EXPECTED
    assert policy_of(client_for(member).get("/")) == EXPECTED


@pytest.mark.parametrize("path", template_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_templates_hold_nothing_the_policy_blocks(path):
    assert violations(path.read_text()) == []


@pytest.mark.slow
def test_rendered_pages_hold_nothing_the_policy_blocks(client_for, admin, team):
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = client_for(admin)
    urls = [
        *plain_urls(),
        f"/teams/{team.pk}/",
        "/admin/",
        "/admin/accounts/team/",
        "/admin/accounts/team/add/",
    ]
    checked = 0
    for url in urls:
        response = client.get(url)
        if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
            assert violations(response.content.decode()) == [], url
            checked += 1
    assert checked >= 10
