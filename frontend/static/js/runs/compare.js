// Overlaid curves of one series for the compared runs, aligned by step; the baseline is drawn dashed.
(async () => {
  const div = document.getElementById("compare-chart");
  if (!div || !window.Plotly) return;
  const response = await fetch(div.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const data = await response.json();
  const traces = data.runs.map((run) => ({
    x: run.x, y: run.y, mode: "lines", type: "scatter",
    name: RunCharts.text(run.baseline ? `${run.name} (baseline)` : run.name),
    line: run.baseline ? { dash: "dash", width: 3 } : {},
  }));
  const layout = RunCharts.themed({ title: { text: RunCharts.text(data.key) }, margin: { l: 48, r: 12, t: 36, b: 40 }, height: 380, xaxis: { title: { text: "step" } }, hovermode: "x unified" });
  Plotly.react(div, traces, layout, { displaylogo: false, responsive: true });
})();
