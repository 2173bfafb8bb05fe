"""In chromium: a run still in its SFT warm start shows its SFT loss chart and progress on the dashboard,
the phase it reports once SFT is done, and the RL charts appear by themselves once its first RL step is
stored."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from trainers.workbench_api import Phase
from workbench.runs.execution.sink import DatabaseSink
from workbench.runs.models import RunStatus

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def log_sft(sink: DatabaseSink, steps: range, total: int = 100) -> None:
    for step in steps:
        sink.log_sft(step, {"sft/loss": 6.0 / step, "sft/lr": 1e-3, "sft/progress": step / total})
    sink.flush()


def test_the_dashboard_follows_the_sft_stage_then_rl(page, login, member, run, console_log):
    run.status = RunStatus.RUNNING
    run.save()
    sink = DatabaseSink(run.pk)
    log_sft(sink, range(1, 41))
    login(member)
    page.goto(run.get_absolute_url())
    expect(page.locator("#chart-sft .scatterlayer .trace path.js-line").first).to_be_visible()
    expect(page.locator("#sft-progress")).to_contain_text("SFT 40%")
    assert page.locator("#chart-reward").count() == 0 and page.locator("#no-metrics").count() == 0

    log_sft(sink, range(41, 101))
    sink.log_phase(Phase.STARTING_RL)  # SFT done; the trainer is being built (no step for a while)
    expect(page.locator("#sft-progress")).to_contain_text("SFT 100%")
    expect(page.locator("#run-phase")).to_have_text("starting RL: building the trainer…")
    sink.log_phase(Phase.TRAINING)
    expect(page.locator("#run-phase")).to_contain_text("running RL step 1")
    sink.log_metrics(1, {"reward/mean": 0.2, "tools/calls_per_traj": 0.5})
    sink.flush()
    # the polled status strip sees the new steps and the page draws the RL charts it did not have
    expect(page.locator("#chart-reward .scatterlayer .trace path").first).to_be_attached(timeout=30_000)
    expect(page.locator("#sft-progress")).to_have_count(0)
    expect(page.locator("#run-phase")).to_have_count(0)  # the step counter says it trains
    # the SFT chart's data is fetched after the RL charts are drawn (dashboard.js's refreshAll)
    page.wait_for_function("() => document.getElementById('chart-sft').data[0].x.length === 100")
    assert console_log.problems == []
