"""In chromium: the home page after login shows the team's live run with its sparkline and alert, a
finished run, a worker, and keeps the live part current by polling; nothing logs an error."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from workbench.jobs.models import WorkerHeartbeat
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import alerts_record, metrics_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_home_shows_what_is_happening_and_follows_the_live_run(
    page, login, member, team, console_log, screenshot
):
    live = Run.objects.create(
        team=team, created_by=member, name="live-run", status="running", config={"training": {"steps": 60}},
        worker="celery@box", started_at=timezone.now(),
    )  # fmt: skip
    metrics_ingest(run_id=live.pk, points=[(s, "reward/mean", s / 40) for s in range(20)])
    alerts_record(run_id=live.pk, alerts=[{"step": 15, "rule": "entropy_drop", "message": "entropy fell"}])
    done = Run.objects.create(
        team=team, created_by=member, name="done-run", status="succeeded", config={},
        finished_at=timezone.now(),
    )  # fmt: skip
    metrics_ingest(run_id=done.pk, points=[(3, "eval/accuracy", 0.75)])
    now = timezone.now()
    WorkerHeartbeat.objects.create(
        hostname="celery@box", queues=["gpu"], pid=1, started_at=now, last_seen=now
    )

    login(member)
    item = page.locator(f'#home-in-flight li[data-run="{live.pk}"]')
    expect(item).to_contain_text("step 19 of 60")
    expect(item.locator("svg.sparkline polyline")).to_be_visible()
    assert len(item.locator("polyline").get_attribute("points").split()) == 20
    expect(item.locator(".alert")).to_contain_text("entropy_drop at step 15: entropy fell")
    expect(page.locator("#home-finished")).to_contain_text("done-run")
    expect(page.locator("#home-finished")).to_contain_text("0.750")
    expect(page.locator('#home-workers li[data-hostname="celery@box"]')).to_contain_text("running live-run")
    screenshot("home")

    # the run trains on: the polled live part shows the new step without a reload
    metrics_ingest(run_id=live.pk, points=[(s, "reward/mean", s / 40) for s in range(20, 30)])
    expect(item).to_contain_text("step 29 of 60", timeout=30_000)
    assert len(page.locator(f'li[data-run="{live.pk}"] polyline').get_attribute("points").split()) == 30

    # it finishes: the next poll moves it from in flight to the finished runs
    Run.objects.filter(pk=live.pk).update(status="succeeded", finished_at=timezone.now())
    expect(page.locator("#home-finished")).to_contain_text("live-run", timeout=30_000)
    expect(item).to_have_count(0)
    expect(page.locator("#home-finished")).to_contain_text("done-run")

    page.get_by_role("link", name="torl", exact=True).click()
    page.wait_for_url("**/runs/new/?preset=torl")
    assert console_log.problems == []
