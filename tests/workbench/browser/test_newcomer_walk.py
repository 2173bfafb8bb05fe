"""The newcomer's first walk, in chromium, on the state `make run` leaves: the demo team, user and catalog
seeded by its commands, and its two demo runs trained by real Celery workers (one torch thread each, as
make run's worker gives them). Log in as the demo user and watch the home page: both runs in flight, the
collapse run's reward sparkline first (its SFT stage is short), then the learning run's once the collapse
run has finished; follow the learning run to its dashboard until it has finished (every chart with data
drawn, the reward rising), open its best trajectory that called the calculator, turn by turn, then compare
it with the collapse run, whose echo-trap alert the comparison names. No page logs a console error.

The walk is one test: the training is the expensive part (both runs at once, a core each), and browser
tests run on a transactional database that is emptied after each test."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.support.polling import wait_for
from tests.workbench.support.browser import log_in
from tests.workbench.support.charts import assert_every_chart_drawn, dashboard_chart_count
from tests.workbench.support.worker import REPO_ROOT, WorkerProcess
from workbench.runs.management.commands.seed_demo_runs import COLLAPSE, LEARNING
from workbench.runs.models import Run, RunStatus
from workbench.runs.web.overview import best_metrics

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(1800)]

DEMO_LOGIN = ("demo", "demo-workbench")  # what `make run` prints when DEMO_PASSWORD is unset
SPARKLINE_POINTS = 3  # RL steps a run shows on the home page before the walk goes on
TRAINED = 1_200_000  # ms: both demo runs train within this on a 2-core machine at a load average of 10


def manage(*args: str, env: dict) -> None:
    """A management command in its own process, as `make run` runs it."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"


@pytest.fixture
def make_run_state(settings, tmp_path, worker_env, transactional_db):
    """`make run` after its commands: seed_demo and seed_demo_runs on this session's test database, and
    two workers training the demo runs (make run's one worker of concurrency 2, as two processes: the test
    workers are solo). Its state lives in a var directory of the test's own."""
    # seed_demo hashes the demo password with the project's hasher, which the tests' fast one cannot read
    settings.PASSWORD_HASHERS = [
        *settings.PASSWORD_HASHERS,
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]
    env = {**worker_env, "OMP_NUM_THREADS": "1", "WORKBENCH_VAR_DIR": str(tmp_path / "var")}
    # Broker keys of their own: the session's worker, if another test started it, never takes a demo run.
    env["REDIS_KEY_PREFIX"] = f"wbwalk-{uuid.uuid4().hex[:8]}:"
    env.pop("DEMO_PASSWORD", None)
    workers = [WorkerProcess(env=env, log_dir=tmp_path) for _ in range(2)]
    for worker in workers:
        worker.start()  # they boot while the catalog is seeded
    try:
        manage("seed_demo", env=env)
        manage("seed_demo_runs", env=env)
        for worker in workers:
            worker.wait_online()
        yield {run.name: run for run in Run.objects.filter(team__name="Demo team")}
    finally:
        for worker in workers:
            worker.stop()


def finished(run: Run) -> bool:
    run.refresh_from_db()
    return run.is_finished


def wait_until_finished(run: Run, timeout_s: float = TRAINED / 1000) -> None:
    wait_for(lambda: finished(run), timeout_s, f"the {run.name} run to finish", every=1)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error, run.log_tail)


def series_y(page, run: Run, key: str) -> list[float]:
    """A run's series as its dashboard reads it: the charts' JSON endpoint, every step."""
    response = page.request.get(f"/runs/{run.pk}/series/?keys={key}&buckets=2000")
    assert response.ok, response.status
    return response.json()["series"][key]["y"]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def in_flight(page, run: Run):
    return page.locator(f'#home-in-flight li[data-run="{run.pk}"]')


def wait_for_sparkline(page, run: Run) -> None:
    """Until the home page's live part, which refreshes itself, draws a few RL steps of the run's reward."""
    line = f'#home-in-flight li[data-run="{run.pk}"] svg.sparkline polyline'
    page.wait_for_function(
        f"() => (document.querySelector('{line}')?.getAttribute('points') || '').trim().split(/\\s+/).length"
        f" >= {SPARKLINE_POINTS}",
        timeout=TRAINED,
    )


def see_both_runs_in_flight(page, learning: Run, collapse: Run) -> None:
    """Home lists both demo runs in flight; the collapse run, its SFT stage short, draws its reward first."""
    for run in (learning, collapse):
        expect(in_flight(page, run)).to_contain_text(run.name)
    wait_for_sparkline(page, collapse)
    expect(in_flight(page, learning)).to_contain_text(learning.name)
    expect(page.locator("#home-workers")).to_contain_text(learning.name)


def see_the_learning_run_learn(page, learning: Run, collapse: Run) -> None:
    """Later (the page reloaded once the collapse run has finished): the learning run in flight with its
    reward sparkline and step, the collapse run among the finished ones with its headline metric (its
    evaluation accuracy where it logged one, else its reward) at its best."""
    wait_for_sparkline(page, learning)
    wait_until_finished(collapse)
    page.reload()
    item = in_flight(page, learning)
    expect(item.locator("svg.sparkline polyline")).to_be_visible()
    expect(item).to_contain_text(f"of {learning.config['training']['steps']}")
    assert len(item.locator("polyline").get_attribute("points").split()) >= SPARKLINE_POINTS
    best = best_metrics(run_ids=[collapse.pk])[collapse.pk]
    finished = page.locator("#home-finished li", has_text=collapse.name)
    expect(finished).to_contain_text(
        re.compile(rf"best\s+{re.escape(best.key)}\s+-?\d+\.\d{{3}}\s+at step {best.step}\b")
    )


def watch_the_learning_run_finish(page, run: Run) -> None:
    """Its dashboard follows it to the end; then every chart with data is drawn, the reward rose over the
    run (last five steps against the first five, from the charts' own data) and no alert was raised."""
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=TRAINED)
    reward = series_y(page, run, "reward/mean")
    assert len(reward) == run.config["training"]["steps"]
    assert mean(reward[-5:]) > mean(reward[:5]) + 0.1, reward
    page.wait_for_function(
        f"() => document.getElementById('chart-reward').data.at(-1).x.length === {len(reward)}"
    )
    available = page.request.get(f"/runs/{run.pk}/series/?keys=&available=1").json()["available"]
    expected = dashboard_chart_count(page, available)
    assert expected >= 10  # reward, its components, SFT loss, tool calls, losses, ...
    assert_every_chart_drawn(page, expected)
    expect(page.locator("#chart-sft .scatterlayer .trace path.js-line").first).to_be_visible()
    expect(page.locator("#alerts")).to_have_count(0)


def open_a_rewarded_trajectory(page) -> None:
    """From the dashboard to the inspector, filtered to trajectories that called the calculator, best
    reward first, and the first one turn by turn: the prompt, the call, the calculator's answer."""
    page.get_by_role("link", name="Trajectories", exact=True).click()
    filters = page.locator("#trajectory-filters")
    filters.locator("[name=tool]").fill("calculator")
    filters.locator("[name=sort]").select_option("-reward")  # a change: htmx swaps the rows, pushes the URL
    expect(page).to_have_url(re.compile(r"tool=calculator.*sort=-reward"))
    rows = page.locator("#trajectory-rows tbody tr")
    expect(rows.first).to_contain_text("calculator×")
    best = float(rows.first.locator("td").nth(2).inner_text())
    assert best > 0, "no trajectory that called the calculator earned a reward"
    rows.first.locator("a").first.click()
    page.wait_for_url("**/trajectories/*/")
    turns = page.locator(".turns > li")
    expect(turns.first).to_be_visible()
    assert turns.count() >= 3  # the prompt, the assistant's call, the tool's answer (then the final answer)
    expect(page.locator(".summary .facts")).to_contain_text(f"{best:.3f}")
    expect(page.locator(".turns .role-assistant .tool-call code").first).to_have_text("calculator")
    expect(page.locator(".turns .tool-result").first).to_contain_text("calculator")


def compare_with_the_collapse(page, learning: Run, collapse: Run) -> None:
    """Back to the dashboard, Compare, pick the collapse run too: both curves drawn, its alert named."""
    page.locator(".breadcrumb a", has_text=learning.name).click()
    page.get_by_role("link", name="Compare", exact=True).click()
    page.locator("#run-picker > summary").click()
    page.get_by_label(collapse.name).check()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.wait_for_url(lambda url: len(parse_qs(urlsplit(url).query).get("runs", [])) == 2)
    assert set(parse_qs(urlsplit(page.url).query)["runs"]) == {str(learning.pk), str(collapse.pk)}
    assert_every_chart_drawn(page, 1)
    assert page.evaluate("document.getElementById('compare-chart').data.length") == 2
    latest = collapse.alerts.order_by("-step", "-id").first()
    assert latest is not None, "the collapse run raised no alert"
    summary = page.locator("#compare-summary tbody tr")
    expect(summary.filter(has_text=collapse.name).locator("td.alerts")).to_contain_text(
        f"{latest.rule} at step {latest.step}"
    )
    expect(summary.filter(has_text=learning.name).locator("td.alerts")).to_have_text("—")


def test_the_newcomers_walk_through_the_demo(page, make_run_state, console_log, screenshot):
    learning, collapse = make_run_state[LEARNING], make_run_state[COLLAPSE]
    log_in(page, *DEMO_LOGIN)
    assert urlsplit(page.url).path == "/"
    see_both_runs_in_flight(page, learning, collapse)
    see_the_learning_run_learn(page, learning, collapse)
    screenshot("demo-home")

    in_flight(page, learning).get_by_role("link", name=learning.name).click()
    page.wait_for_url(f"**{learning.get_absolute_url()}")
    watch_the_learning_run_finish(page, learning)
    screenshot("demo-dashboard")

    open_a_rewarded_trajectory(page)
    screenshot("demo-trajectory")

    compare_with_the_collapse(page, learning, collapse)
    screenshot("demo-compare")
    assert console_log.problems == []
