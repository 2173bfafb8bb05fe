// The live run dashboard: one JSON request draws every chart; the htmx-polled status strip triggers
// refreshes; zooming re-fetches that chart's range (the server keeps min, max and last per bucket);
// clicking a point opens that step's trajectories. The browser revalidates every request with the
// server's ETag, so what did not change costs a 304.
(() => {
  const root = document.getElementById("dashboard");
  const container = document.getElementById("charts");
  if (!root || !container || !window.Plotly) return;
  const seriesUrl = root.dataset.seriesUrl;
  const inspectorUrl = root.dataset.inspectorUrl;
  let available = JSON.parse(document.getElementById("series-keys").textContent);
  let charts = [];
  const ranges = {}; // chart id -> [lo, hi] while zoomed

  function url(keys, range, element, discover = false) {
    const params = new URLSearchParams({ keys: keys.join(","), buckets: RunCharts.buckets(element) });
    if (range) { params.set("step_min", Math.floor(range[0])); params.set("step_max", Math.ceil(range[1])); }
    if (discover) params.set("available", "1"); // also list the series the run has logged
    return `${seriesUrl}?${params}`;
  }

  async function fetchJson(address) {
    const response = await fetch(address, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`${response.status} ${address}`);
    return response.json();
  }

  function element(chart) {
    let div = document.getElementById(`chart-${chart.id}`);
    if (!div) {
      div = document.createElement("div");
      div.id = `chart-${chart.id}`;
      div.className = "chart";
      container.appendChild(div);
    }
    return div;
  }

  function draw(chart, data) {
    const div = element(chart);
    const shapes = chart.sft ? [] : RunCharts.alertShapes(data.alerts); // alerts are at RL steps
    const traces = RunCharts.traces(chart, data.series);
    const layout = RunCharts.layout(chart, traces, shapes, ranges[chart.id], div.clientWidth);
    if (chart.sft) layout.xaxis.title.text = "SFT step";
    Plotly.react(div, traces, layout, { displaylogo: false, responsive: true });
    if (!div.dataset.bound) {
      div.dataset.bound = "1";
      div.on("plotly_relayout", (event) => zoom(chart, event));
      if (chart.sft) return; // an SFT step has no trajectories to open
      div.on("plotly_click", (event) => {
        const step = Math.round(event.points[0].x);
        window.location.href = `${inspectorUrl}?step=${step}`;
      });
    }
  }

  async function zoom(chart, event) {
    if (event["xaxis.autorange"]) delete ranges[chart.id];
    else if (event["xaxis.range[0]"] !== undefined) ranges[chart.id] = [event["xaxis.range[0]"], event["xaxis.range[1]"]];
    else return;
    const data = await fetchJson(url(chart.keys, ranges[chart.id], element(chart)));
    draw(chart, data);
  }

  // SFT and RL charts are fetched apart: each request's step window ends at its own keys' last step.
  async function refreshGroup(group, discover = false) {
    const keys = [...new Set(group.flatMap((c) => [...c.keys, ...(c.band ? [c.band] : [])]))];
    if (!keys.length && !discover) return null;
    const data = await fetchJson(url(keys, null, container, discover));
    for (const chart of group) {
      if (ranges[chart.id]) continue; // a zoomed chart keeps its range until reset
      draw(chart, data);
    }
    return data;
  }

  async function refreshAll() {
    await refreshGroup(charts.filter((c) => !c.sft));
    await refreshGroup(charts.filter((c) => c.sft));
  }

  // After new steps: one request redraws the RL charts and lists the series the run has now (a run logs
  // new series after the page loaded: its first, evaluations, SFT then RL); charts for new series are
  // resolved and drawn with one more request.
  async function follow() {
    const data = await refreshGroup(charts.filter((c) => !c.sft), true);
    if (data.available && data.available.join("\n") !== available.join("\n")) {
      available = data.available;
      charts = RunCharts.resolve(available);
      document.getElementById("no-metrics")?.remove();
      await refreshAll();
    } else {
      await refreshGroup(charts.filter((c) => c.sft));
    }
  }

  async function start() {
    charts = RunCharts.resolve(available);
    await refreshAll();
  }

  const progress = (strip) => `${strip?.dataset.lastStep}/${strip?.dataset.sftStep}`; // RL step, SFT step
  let lastProgress = progress(document.getElementById("run-status"));
  document.body.addEventListener("htmx:afterSettle", async (event) => {
    const strip = document.getElementById("run-status");
    if (!strip || !event.target.contains(strip)) return;
    if (progress(strip) === lastProgress && strip.dataset.status === "running") return;
    lastProgress = progress(strip);
    await follow();
  });

  start();
})();
