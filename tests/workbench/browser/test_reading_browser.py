"""In chromium, pages as a newcomer reads them: the split tabs of a dataset say which split is shown, an
empty split says so (not "The first 0 rows"), ground-truth tool calls and field examples are JSON, and a
reader whose system asks for a dark palette gets one, the charts too."""

import json

import pytest
from playwright.sync_api import expect

from tests.workbench.support.datasets import stored_version
from trainers.config import RunConfig
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import metrics_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

ROWS = [
    {
        "question": "What is 2 + 2?",
        "tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}],
    },
    {"question": "What is 3 + 3?", "answer": "6"},
]

# The background a page's body and each chart's SVG paint, as "r,g,b".
BACKGROUNDS = """() => {
  const rgb = (el) => getComputedStyle(el).backgroundColor.match(/\\d+/g).slice(0, 3).join(",");
  const charts = [...document.querySelectorAll('.js-plotly-plot .main-svg:first-child')];
  const titles = [...document.querySelectorAll('.js-plotly-plot .gtitle')];
  return { body: rgb(document.body), charts: charts.map(rgb), chartText: titles.map((t) => t.style.fill) };
}"""


def test_split_tabs_show_the_split_and_an_empty_split_says_so(page, login, member, team):
    version = stored_version(team, member, "mixed", ROWS)  # every row in the train split
    login(member)
    page.goto(version.item.get_absolute_url())
    tabs = page.get_by_role("group", name="Split").get_by_role("button")
    expect(page.get_by_role("button", name="All")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#rows")).to_contain_text("The first 2 rows of v1")
    expected = json.dumps(ROWS[0]["tool_calls"], indent=2, sort_keys=True)
    assert page.locator("#preview pre").first.inner_text() == expected
    example = page.locator("#statistics tr", has_text="tool_calls").locator("td").last
    expect(example).to_have_text(json.dumps(ROWS[0]["tool_calls"]))  # not [{'name': 'calculator', ...}]

    page.get_by_role("button", name="Eval").click()
    expect(page.get_by_role("button", name="Eval")).to_have_attribute("aria-pressed", "true")
    assert [tabs.nth(i).get_attribute("aria-pressed") for i in range(3)] == ["false", "false", "true"]
    expect(page.locator("#rows")).to_contain_text("No rows in the eval split.")
    expect(page.locator("#rows")).not_to_contain_text("The first 0")
    pressed = page.get_by_role("button", name="Eval").evaluate("(b) => getComputedStyle(b).backgroundColor")
    plain = page.get_by_role("button", name="All").evaluate("(b) => getComputedStyle(b).backgroundColor")
    assert pressed != plain  # the active tab is seen, not only announced


def _dark(rgb: str) -> bool:
    return sum(int(v) for v in rgb.split(",")) < 3 * 80


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pages_and_charts_follow_the_readers_colour_scheme(page, login, member, team, scheme):
    run = Run.objects.create(
        team=team, created_by=member, name="palette", config=RunConfig().model_dump(mode="json")
    )
    points = [(s, "reward/mean", s / 10) for s in range(1, 11)] + [
        (s, "loss/entropy", 1.0) for s in range(1, 11)
    ]
    metrics_ingest(run_id=run.pk, points=points)
    page.emulate_media(color_scheme=scheme)
    login(member)
    page.goto(run.get_absolute_url())
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2")
    seen = page.evaluate(BACKGROUNDS)
    assert _dark(seen["body"]) == (scheme == "dark"), seen
    assert len(seen["charts"]) == 2 and all(_dark(c) == (scheme == "dark") for c in seen["charts"]), seen
    assert all(_dark(",".join(t.replace("rgb(", "").replace(")", "").split(", "))) == (scheme == "light")
               for t in seen["chartText"]), seen  # fmt: skip
