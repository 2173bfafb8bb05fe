"""In chromium: every chart that has data draws its lines, on a dashboard with all of a real run's series
and on the compare page with several runs, and the pages log nothing broken.

Charts were WebGL (`scattergl`) plots; chromium keeps 16 WebGL contexts and drops the oldest, so the
dashboard's first charts showed empty axes while their data was there. Only the drawn SVG says a chart
shows its lines. The `page` fixture fails a test whose page logged a console error, a WebGL message
or a failed request; these tests also check it where the charts are drawn.
"""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect

from tests.workbench.support.charts import assert_every_chart_drawn, dashboard_chart_count
from trainers.metrics.keys import STANDARD_KEYS, reward_component_key, tool_calls_key
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import metrics_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

STEPS = 400
COMPONENTS = ("correctness", "format", "tool_use")
TOOLS = ("calculator", "python", "search")
EVAL_KEYS = ("eval/accuracy", "eval/reward_mean")  # the sink logs evaluations as eval/<name>


def real_run_metrics(start: int, stop: int, phase: float = 0.0) -> list[tuple[int, str, float]]:
    """Every series a tool-using GRPO run logs: the standard keys, per reward component, per tool, and
    evaluations every 20 steps."""
    keys = [*STANDARD_KEYS, *map(reward_component_key, COMPONENTS), *map(tool_calls_key, TOOLS)]
    points = [
        (step, key, 1.0 + 0.5 * math.sin(step / 25 + i + phase))
        for step in range(start, stop)
        for i, key in enumerate(keys)
    ]
    points += [
        (step, key, 0.5 + 0.3 * math.tanh(step / 200)) for step in range(start, stop, 20) for key in EVAL_KEYS
    ]
    return points


def test_dashboard_with_every_series_of_a_real_run_draws_every_chart(page, login, member, run, console_log):
    metrics_ingest(run_id=run.pk, points=real_run_metrics(0, STEPS))
    login(member)
    page.goto(run.get_absolute_url())
    # as many charts as the dashboard defines for these keys: all of them
    expected = dashboard_chart_count(page)
    assert expected >= 16
    assert_every_chart_drawn(page, expected)
    for chart in ("reward", "group-std", "components", "entropy", "grad-norm", "kl", "clip"):
        expect(page.locator(f"#chart-{chart} .scatterlayer .trace path.js-line").first).to_be_visible()
    assert page.locator("canvas").count() == 0  # no chart holds a WebGL context
    assert console_log.problems == []


# Per chart with a legend: whether the x-axis title's box meets the legend's.
TITLE_ON_LEGEND = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .filter((div) => div.querySelector('.legend'))
  .map((div) => {
    const t = div.querySelector('.g-xtitle').getBoundingClientRect();
    const l = div.querySelector('.legend').getBoundingClientRect();
    const overlap = t.left < l.right && l.left < t.right && t.top < l.bottom && l.top < t.bottom;
    return { id: div.id, overlap };
  })"""


def test_dashboard_step_titles_clear_the_legends(page, login, member, run, console_log):
    metrics_ingest(run_id=run.pk, points=real_run_metrics(0, 50))
    login(member)
    page.goto(run.get_absolute_url())
    expected = dashboard_chart_count(page)
    assert_every_chart_drawn(page, expected)
    charts = page.evaluate(TITLE_ON_LEGEND)
    assert len(charts) >= 8  # every chart with two series or more has a legend below it
    assert [c["id"] for c in charts if c["overlap"]] == []
    assert console_log.problems == []


def test_compare_with_several_runs_draws_every_run(page, login, member, team, run, console_log):
    runs = [run]
    for i in range(1, 5):
        runs.append(
            Run.objects.create(
                team=team, created_by=member, name=f"run {i}", config=run.config, is_baseline=i == 1
            )
        )
    for i, each in enumerate(runs):
        metrics_ingest(run_id=each.pk, points=real_run_metrics(0, STEPS - 50 * i, phase=i))
    login(member)
    ids = ",".join(str(r.pk) for r in runs)
    page.goto(f"/runs/compare/?runs={ids}&key=reward/mean")
    assert_every_chart_drawn(page, 1)
    assert page.evaluate("document.getElementById('compare-chart').data.length") == len(runs)
    page.locator("#compare-key select[name=key]").select_option("loss/kl")
    page.wait_for_url(lambda url: "key=loss%2Fkl" in url or "key=loss/kl" in url)
    assert_every_chart_drawn(page, 1)
    assert page.evaluate("document.getElementById('compare-chart').data.length") == len(runs)
    # each run's dashboard, one after the other in the same tab, draws too
    for each in runs[:2]:
        page.goto(each.get_absolute_url())
        expected = dashboard_chart_count(page)
        assert_every_chart_drawn(page, expected)
    assert console_log.problems == []


def test_a_series_with_a_single_point_is_drawn(page, login, member, run, console_log):
    """An evaluation logged once (the demo runs evaluate at their last step) shows a marker: a line
    through one point draws nothing, and the Evaluation chart showed empty axes."""
    points = [(step, "reward/mean", step / 30) for step in range(1, 31)] + [(30, "eval/accuracy", 0.6)]
    metrics_ingest(run_id=run.pk, points=points)
    login(member)
    page.goto(run.get_absolute_url())
    assert dashboard_chart_count(page) == 2
    assert_every_chart_drawn(page, 2)
    expect(page.locator("#chart-eval .scatterlayer .trace .points path")).to_have_count(1)
    assert console_log.problems == []


EVAL_NAMES = {  # what an evaluation logs per mode, and a typical value: shares, counts, a length
    "accuracy": 0.4, "pass@1": 0.4, "answered_rate": 0.9, "tool_call_rate": 1.0, "failed_call_rate": 0.2,
    "tool_calls_per_traj": 1.3, "tool_calls_per_solved": 2.5, "failed_calls_per_traj": 0.3,
    "tool_productivity": 0.4, "response_length": 150.0,
}  # fmt: skip

# Per chart: its trace names, its legend's entries, and whether each entry lies inside the chart's box.
LEGENDS = """() => [...document.querySelectorAll('.js-plotly-plot')].map((div) => {
  const box = div.getBoundingClientRect();
  const entries = [...div.querySelectorAll('.legend .traces')].map((g) => g.getBoundingClientRect());
  return {
    id: div.id,
    names: div.data.filter((t) => t.showlegend !== false).map((t) => t.name),
    legend: [...div.querySelectorAll('.legend .legendtext')].map((t) => t.textContent),
    inside: entries.every((r) => r.top >= box.top && r.bottom <= box.bottom && r.right <= box.right + 1),
    y: div.data.flatMap((t) => t.y),
    yrange: div.layout.yaxis.range || null,
  };
})"""


def test_tool_and_evaluation_charts_name_their_series_and_keep_shares_apart(page, login, member, run):
    """A run whose every call failed to parse: its tool chart shows success at 0 beside parse errors at
    1, both named in a legend on a 0-100% axis (a lone parse-error line at 1.0 read as 100% success);
    unnamed calls are named, and so are the servers whose calls failed; the evaluation's shares,
    tool-call counts and lengths get charts of their own; every chart has a legend, and no legend is
    clipped, the 20 evaluation series included."""
    points = []
    for step in range(1, 21):
        points += [(step, "reward/mean", 0.0), (step, "tools/calls_per_traj", 1.0)]
        points += [(step, "tools/calls/(no name)", 1.0), (step, "tools/parse_error_rate", 1.0)]
        points += [(step, "tools/success_rate", 0.0)]
        points += [(step, "tools/server_errors", step % 3), (step, "tools/server_errors/search", step % 3)]
        points += [
            (step, f"eval/{mode}/{name}", v)
            for mode in ("greedy", "sampled")
            for name, v in EVAL_NAMES.items()
        ]
    metrics_ingest(run_id=run.pk, points=points)
    login(member)
    page.goto(run.get_absolute_url())
    assert_every_chart_drawn(page, dashboard_chart_count(page))
    charts = {chart["id"]: chart for chart in page.evaluate(LEGENDS)}
    for chart in charts.values():
        assert chart["legend"] == chart["names"], chart["id"]  # every chart has its legend, one series too
        assert chart["inside"], f"{chart['id']}: a legend entry lies outside the chart"
    success = charts["chart-tool-success"]
    assert success["names"] == success["legend"] == ["succeeded", "failed to parse"]
    assert success["yrange"] == [-0.02, 1.02]
    expect(page.locator("#chart-tool-success .ytick text").last).to_have_text("100%")
    assert charts["chart-tool-calls"]["legend"] == ["all tools", "unparsed call (named no tool)"]
    assert charts["chart-server-errors"]["legend"] == ["all servers", "search"]
    evaluation = {
        key: charts[f"chart-{key}"] for key in ("eval", "eval-tool-use", "eval-tool-calls", "eval-length")
    }
    assert sum(len(chart["names"]) for chart in evaluation.values()) == 2 * len(EVAL_NAMES)
    assert max(evaluation["eval"]["y"] + evaluation["eval-tool-use"]["y"]) <= 1.0
    assert evaluation["eval-length"]["names"] == [
        "eval/greedy/response_length",
        "eval/sampled/response_length",
    ]
