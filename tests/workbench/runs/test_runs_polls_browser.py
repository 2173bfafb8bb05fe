"""In chromium: the dashboard's polls revalidate what the browser kept (htmx's status strip and fetch()'s
chart data send If-None-Match, so an unchanged poll costs the server a 304), and the page still follows a
step stored meanwhile."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from workbench.runs.ingest import metrics_ingest
from workbench.runs.models import RunStatus

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def revalidates(path: str):
    return lambda request: path in request.url and bool(request.all_headers().get("if-none-match"))


def test_dashboard_polls_revalidate_and_follow_a_new_step(page, login, member, run, console_log):
    run.status = RunStatus.RUNNING
    run.save()
    metrics_ingest(run_id=run.pk, points=[(1, "reward/mean", 0.2), (2, "reward/mean", 0.3)])
    login(member)
    page.goto(run.get_absolute_url())
    expect(page.locator("#chart-reward .scatterlayer .trace path.js-line").first).to_be_visible()
    # the page's own strip is not a poll's: the first poll keeps its answer, the next one revalidates it
    with page.expect_request(revalidates("/status/"), timeout=15_000):
        pass

    with page.expect_request(revalidates("/series/?keys=reward"), timeout=15_000):
        metrics_ingest(run_id=run.pk, points=[(3, "reward/mean", 0.4)])
    expect(page.locator("#run-status")).to_contain_text("step 3")
    page.wait_for_function("document.getElementById('chart-reward').data.at(-1).x.length === 3")
    assert console_log.problems == []
