"""In chromium: whether every plotly chart of a page that has data drew its lines.

Only the drawn SVG says a chart shows its lines: charts used to be WebGL plots, and chromium keeps 16 WebGL
contexts and drops the oldest, so a page's first charts showed empty axes while their data was there.
"""

from __future__ import annotations

import contextlib

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

# For each plotly chart whose traces have points: how many traces have points and how many are drawn: an
# SVG path in the trace's group of the scatter layer with a segment or an arc (a line, a fill, a marker);
# a line through a single point is a path "Mx,yZ", which shows nothing.
DRAWN = """() => [...document.querySelectorAll('.js-plotly-plot')].map((div) => ({
  id: div.id,
  withPoints: (div.data || []).filter((t) => (t.y || []).some((v) => v !== null && v !== undefined)).length,
  drawn: [...div.querySelectorAll('.scatterlayer .trace')]
    .filter((g) => [...g.querySelectorAll('path')].some((p) => /[LHVCQA]/i.test(p.getAttribute('d') || '')))
    .length,
}))"""


def assert_every_chart_drawn(page, expected_charts: int) -> None:
    """Once the page plotted its charts, every trace with points is drawn (waiting a little for the SVG)."""
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter((d) => d._fullData).length"
        f" >= {expected_charts}",
        timeout=60_000,
    )
    with contextlib.suppress(PlaywrightTimeoutError):  # the assertion below says which charts are blank
        page.wait_for_function(
            f"() => ({DRAWN})().every((c) => c.withPoints > 0 && c.drawn >= c.withPoints)", timeout=10_000
        )
    charts = page.evaluate(DRAWN)
    assert len(charts) == expected_charts, charts
    blank = [c for c in charts if c["withPoints"] == 0 or c["drawn"] < c["withPoints"]]
    assert blank == [], f"charts with data but no drawn lines: {blank}"


def dashboard_chart_count(page, keys: list[str] | None = None) -> int:
    """How many charts the dashboard defines for `keys` (by default the series the page was served with):
    each of them must be drawn."""
    if keys is None:
        keys = page.evaluate("JSON.parse(document.getElementById('series-keys').textContent)")
    return page.evaluate("(keys) => RunCharts.resolve(keys).length", keys)
