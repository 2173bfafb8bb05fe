"""In chromium: the dashboard's polls revalidate what the browser kept (htmx's status strip and fetch()'s
chart data send If-None-Match, so an unchanged poll costs the server a 304), and the page follows a step
stored meanwhile with one chart data request; the alerts and checkpoints follow the run through the
same poll."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from workbench.runs.models import RunStatus
from workbench.runs.telemetry.ingest import alerts_record, checkpoint_record, metrics_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def revalidates(path: str):
    return lambda request: path in request.url and bool(request.all_headers().get("if-none-match"))


def store_and_follow(page, run, step: int) -> None:
    """Store an RL step; the strip shows it and the reward chart draws it."""
    metrics_ingest(run_id=run.pk, points=[(step, "reward/mean", step / 10)])
    expect(page.locator("#run-status")).to_contain_text(f"step {step}")
    page.wait_for_function(
        "(n) => document.getElementById('chart-reward').data.at(-1).x.length === n", arg=step
    )


def test_dashboard_polls_revalidate_and_follow_a_new_step(page, login, member, run, console_log):
    run.status = RunStatus.RUNNING
    run.save()
    metrics_ingest(run_id=run.pk, points=[(1, "reward/mean", 0.1), (2, "reward/mean", 0.2)])
    login(member)
    page.goto(run.get_absolute_url())
    expect(page.locator("#chart-reward .scatterlayer .trace path.js-line").first).to_be_visible()
    # the page's own strip is not a poll's: the first poll keeps its answer, the next one revalidates it
    with page.expect_request(revalidates("/status/"), timeout=15_000):
        pass

    store_and_follow(page, run, 3)  # the chart data asked for after a step: a new request
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/series/" in request.url else None)
    with page.expect_request(revalidates("/series/?keys=reward"), timeout=15_000):
        store_and_follow(page, run, 4)  # the same request after the next step: revalidated
    # one request per step: the RL charts' data with the list of series (no new series, no second one)
    assert len(asked) == 1 and "available=1" in asked[0], asked
    assert console_log.problems == []


def test_alerts_and_checkpoints_appear_while_the_run_streams(page, login, member, run):
    """No reload: the strip's poll carries the Alerts card and the Checkpoints list out of band (no timer
    of their own), and a list the reader opened stays open as checkpoints arrive."""
    run.status = RunStatus.RUNNING
    run.save()
    login(member)
    page.goto(run.get_absolute_url())
    expect(page.locator("#alerts")).to_have_count(0)
    expect(page.locator("#checkpoints-count")).to_have_text("0")
    page.locator("#checkpoints > summary").click()
    expect(page.locator("#checkpoint-list")).to_contain_text("No checkpoint saved yet.")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(urlparse(request.url).path))
    alert = {"step": 3, "rule": "entropy_drop", "message": "entropy fell by 70%"}
    alerts_record(run_id=run.pk, alerts=[alert])
    checkpoint_record(run_id=run.pk, step=3, path="/work/run/checkpoints/step_3")
    expect(page.locator("#alerts")).to_contain_text("step 3 · entropy_drop — entropy fell by 70%")
    listed = page.locator("#checkpoint-list li")
    expect(listed).to_have_text(["step 3: /work/run/checkpoints/step_3 Evaluate"])
    expect(page.locator("#checkpoints-count")).to_have_text("1")
    checkpoint_record(run_id=run.pk, step=6, path="/work/run/checkpoints/step_6")
    expect(page.locator("#checkpoints-count")).to_have_text("2")
    expect(page.locator("#checkpoint-list .evaluate-checkpoint")).to_have_count(2)
    expect(page.locator("#checkpoints")).to_have_attribute("open", "")  # as the reader left it
    assert {path for path in asked if "/series/" not in path} == {f"/runs/{run.pk}/status/"}
