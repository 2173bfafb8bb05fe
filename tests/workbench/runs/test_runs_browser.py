"""The runs pages in chromium: live charts, zoom, alerts, inspector, compare, form errors."""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect

from workbench.runs.models import Run, RunStatus
from workbench.runs.telemetry.alerts import run_alerts_detect
from workbench.runs.telemetry.ingest import metrics_ingest, trajectories_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

HOSTILE = '<script>window.hacked=1</script><img src=x onerror="window.hacked=2">'


def metrics(start: int, stop: int, collapse_at: int = 10**9) -> list[tuple[int, str, float]]:
    points = []
    for step in range(start, stop):
        late = step >= collapse_at
        points += [
            (step, "reward/mean", 0.2 if late else 0.3 + 0.4 * math.tanh(step / 80)),  # falls: echo trap
            (step, "reward/std", 0.2),
            (step, "reward/group_std_mean", 0.04 if late else 0.4),
            (step, "loss/entropy", 0.3 if late else 2.0),
            (step, "loss/grad_norm", 9.0 if step == 150 else 1.0),
            (step, "tools/calls/calculator", 0.5),
            (step, "time/generation", 0.2),
        ]
    return points


@pytest.fixture
def live_run(run, make_trajectory):
    run.status = RunStatus.RUNNING
    run.save()
    metrics_ingest(run_id=run.pk, points=metrics(0, 300, collapse_at=200))
    run_alerts_detect(run=run)
    trajectories_ingest(
        run_id=run.pk, batches={5: [make_trajectory("g0", i, text=HOSTILE) for i in range(3)]}
    )
    return run


@pytest.fixture
def page_errors(page):
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: errors.append(f"dialog: {dialog.message}"))
    return errors


def chart_max_step(page, chart_id: str) -> float:
    return page.evaluate(f"Math.max(...document.getElementById('{chart_id}').data.at(-1).x)")


def test_dashboard_draws_live_charts_with_alerts_and_zoom(
    page, login, member, live_run, page_errors, screenshot
):
    login(member)
    page.goto(live_run.get_absolute_url())
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible(timeout=30_000)
    expect(page.locator("#alerts")).to_contain_text("echo_trap")
    assert page.locator(".chart").count() >= 5
    assert page.evaluate("document.getElementById('chart-group-std').layout.shapes.length") >= 1
    with page.expect_response(lambda r: "step_min=100" in r.url, timeout=30_000):
        page.evaluate("Plotly.relayout('chart-entropy', {'xaxis.range[0]': 100, 'xaxis.range[1]': 120})")
    metrics_ingest(run_id=live_run.pk, points=metrics(300, 400))
    # the htmx-polled status strip notices the new steps and the charts re-fetch (slow on a loaded box)
    page.wait_for_function(
        "() => Math.max(...document.getElementById('chart-reward').data.at(-1).x) >= 399", timeout=60_000
    )
    screenshot("runs-dashboard")
    assert page_errors == []


def test_inspector_renders_hostile_output_as_text(page, login, member, live_run, page_errors, screenshot):
    login(member)
    page.goto(f"/runs/{live_run.pk}/trajectories/?step=5")
    page.locator("#trajectory-rows a").first.click()
    expect(page.locator(".turns")).to_contain_text("<script>window.hacked=1</script>")
    expect(page.locator(".turn-masked").first).to_be_visible()
    screenshot("runs-trajectory")
    page.goto(f"/runs/{live_run.pk}/steps/5/groups/g0/")
    expect(page.locator(".sample")).to_have_count(3)
    assert page.evaluate("window.hacked === undefined")
    assert page_errors == []


def test_compare_overlays_runs(page, login, member, live_run, team, page_errors, screenshot):
    other = Run.objects.create(
        team=team, created_by=member, name="baseline", config=live_run.config, is_baseline=True
    )
    metrics_ingest(run_id=other.pk, points=metrics(0, 100))
    login(member)
    page.goto(f"/runs/compare/?runs={live_run.pk},{other.pk}&key=reward/mean")
    expect(page.locator("#compare-chart .main-svg").first).to_be_visible()
    assert page.evaluate("document.getElementById('compare-chart').data.length") == 2
    assert page.evaluate("window.hacked === undefined")
    screenshot("runs-compare")
    assert page_errors == []


def test_new_run_form_shows_schema_errors_on_the_field(page, login, member, page_errors, console_log):
    console_log.allow("/runs/new/")  # the invalid form comes back with status 400, on purpose
    login(member)
    page.goto("/runs/new/?preset=toolrl")
    page.locator("[name='name']").fill("bad eps")
    page.locator("#section-algorithm > summary").click()  # config sections start collapsed
    page.locator("[name='algorithm.eps']").fill("0")
    page.get_by_role("button", name="Launch").click()
    expect(page.locator(".has-error[data-path='algorithm.eps']")).to_be_visible()
    assert page_errors == []


def test_hostile_run_names_stay_text_in_lists_charts_and_compare(page, login, member, live_run, page_errors):
    live_run.name = HOSTILE
    live_run.save()
    login(member)
    for url in ("/runs/", live_run.get_absolute_url(), f"/runs/compare/?runs={live_run.pk}&key=reward/mean"):
        page.goto(url)
        expect(page.locator("main")).to_contain_text("<script>window.hacked=1</script>")
    expect(page.locator("#compare-chart .main-svg").first).to_be_visible()
    assert page.evaluate("window.hacked === undefined")
    assert page_errors == []


def test_cancel_asks_first_and_a_no_leaves_the_run_alone(page, login, member, live_run):
    """Cancel is one click from the charts: it asks, names the run, and only a yes cancels it."""
    questions: list[str] = []
    answer = {"yes": False}
    cancel_url = f"/runs/{live_run.pk}/cancel/"
    sent: list[str] = []

    def reply(dialog) -> None:
        questions.append(dialog.message)
        dialog.accept() if answer["yes"] else dialog.dismiss()

    page.on("dialog", reply)
    page.on("request", lambda request: sent.append(request.url) if request.url.endswith(cancel_url) else None)
    login(member)
    page.goto(live_run.get_absolute_url())
    page.locator("#cancel-run").click()
    assert len(questions) == 1 and f"Cancel the run “{live_run.name}”?" in questions[0], questions
    expect(page.locator("#cancel-run")).to_be_visible()

    answer["yes"] = True
    with page.expect_response(lambda response: response.url.endswith(cancel_url)):
        page.locator("#cancel-run").click()
    expect(page.locator("#run-status")).to_contain_text("cancelling")
    assert len(questions) == 2 and len(sent) == 1  # the "no" sent nothing: the one request is the "yes"
    live_run.refresh_from_db()
    assert live_run.cancel_requested
