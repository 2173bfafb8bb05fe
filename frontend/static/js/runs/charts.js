// Chart definitions for the run dashboard and helpers shared with the compare page.
// Keys follow trainers/metrics/keys.py; `prefix` charts pick up per-component and per-tool series.
window.RunCharts = (() => {
  const REWARD_SUMMARIES = ["reward/mean", "reward/std", "reward/group_std_mean", "reward/zero_variance_frac"];
  // An evaluation logs eval/[mode/]<name>: shares (0-1), tool-call counts and token lengths, each on its own
  // chart so that no axis mixes a length of ~150 with a share of 0.5.
  const EVAL_TOOL_RATES = /\/(tool_call_rate|failed_call_rate)$/;
  const EVAL_TOOL_COUNTS = /\/(tool_calls_per_traj|tool_calls_per_solved|failed_calls_per_traj|tool_productivity)$/;
  const EVAL_LENGTH = /\/response_length$/;
  const EVAL_APART = new RegExp([EVAL_TOOL_RATES, EVAL_TOOL_COUNTS, EVAL_LENGTH].map((r) => r.source).join("|"));
  const UNNAMED_TOOL = "tools/calls/(no name)"; // trainers' UNNAMED_TOOL: a malformed call that named no tool
  const CHARTS = [
    { id: "reward", title: "Reward mean (band: ± std)", keys: ["reward/mean"], band: "reward/std" },
    { id: "group-std", title: "Within-group reward std (echo-trap signal)", keys: ["reward/group_std_mean", "reward/zero_variance_frac"] },
    { id: "components", title: "Reward components", prefix: "reward/", exclude: REWARD_SUMMARIES },
    { id: "entropy", title: "Policy entropy", keys: ["loss/entropy"] },
    { id: "grad-norm", title: "Grad norm", keys: ["loss/grad_norm"] },
    { id: "kl", title: "KL", keys: ["loss/kl", "loss/approx_kl"] },
    { id: "clip", title: "Clip fraction", keys: ["loss/clipfrac_low", "loss/clipfrac_high", "loss/clipfrac_dual"] },
    { id: "length", title: "Response length (tokens)", keys: ["rollout/response_length", "rollout/response_length_max"] },
    { id: "turns", title: "Turns per trajectory", keys: ["rollout/turns", "rollout/truncated_frac"] },
    { id: "mismatch", title: "Sampler vs trainer log-prob gap", keys: ["rollout/logprob_mismatch_mean", "rollout/logprob_mismatch_max"] },
    {
      id: "tool-calls", title: "Tool calls per trajectory (by tool)", keys: ["tools/calls_per_traj"], prefix: "tools/calls/",
      label: (key) => ({ "tools/calls_per_traj": "all tools", [UNNAMED_TOOL]: "unparsed call (named no tool)" })[key] || key.slice("tools/calls/".length),
    },
    {
      id: "tool-success", title: "Tool calls: share that succeeded, share that failed to parse", keys: ["tools/success_rate", "tools/parse_error_rate"],
      label: (key) => ({ "tools/success_rate": "succeeded", "tools/parse_error_rate": "failed to parse" })[key], share: true,
    },
    {
      id: "server-errors", title: "Tool calls that failed at their server (MCP, environment servers), per step",
      keys: ["tools/server_errors"], prefix: "tools/server_errors/",
      label: (key) => (key === "tools/server_errors" ? "all servers" : key.slice("tools/server_errors/".length)),
    },
    { id: "filtered", title: "Fraction of groups filtered", keys: ["filter/filtered_frac"] },
    { id: "throughput", title: "Throughput (tokens/s)", keys: ["perf/tokens_per_s"] },
    { id: "time", title: "Step time split (s)", keys: ["time/generation", "time/tools", "time/update", "time/step"] },
    { id: "eval", title: "Evaluation: accuracy, pass@k", prefix: "eval/", skip: EVAL_APART },
    { id: "eval-tool-use", title: "Evaluation: tool-call rate (of problems), failed-call rate (of calls)", prefix: "eval/", match: EVAL_TOOL_RATES, share: true },
    { id: "eval-tool-calls", title: "Evaluation: tool calls per problem, per solved problem", prefix: "eval/", match: EVAL_TOOL_COUNTS },
    { id: "eval-length", title: "Evaluation: response length (tokens)", prefix: "eval/", match: EVAL_LENGTH },
    { id: "losses", title: "Losses", keys: ["loss/total", "loss/policy", "loss/value"] },
    // The SFT warm start, numbered by SFT step (RL steps start again at 1): no alerts, no trajectories.
    { id: "sft", title: "SFT warm start: loss", keys: ["sft/loss"], sft: true },
  ];

  // Plotly reads a few HTML tags in trace names and titles; run names and keys are shown as text.
  function text(value) {
    return String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // The keys each chart shows, among those the run has logged.
  function resolve(available) {
    const have = new Set(available);
    return CHARTS.map((chart) => {
      const keys = (chart.keys || []).filter((k) => have.has(k));
      if (chart.prefix) {
        available.filter((k) => k.startsWith(chart.prefix) && !(chart.exclude || []).includes(k) && !keys.includes(k))
          .filter((k) => (!chart.match || chart.match.test(k)) && !(chart.skip && chart.skip.test(k)))
          .forEach((k) => keys.push(k));
      }
      const band = chart.band && have.has(chart.band) ? chart.band : null;
      return { ...chart, keys, band };
    }).filter((chart) => chart.keys.length);
  }

  // Value of `series` at each of `steps`, taking the nearest earlier point (series are downsampled separately).
  function alignTo(steps, series) {
    const out = [];
    let j = 0;
    for (const step of steps) {
      while (j + 1 < series.x.length && series.x[j + 1] <= step) j += 1;
      out.push(series.x.length ? series.y[j] : null);
    }
    return out;
  }

  // SVG `scatter`, never `scattergl`: each scattergl plot holds WebGL contexts, chromium keeps at most 16
  // and drops the oldest, so a dashboard's first charts (reward, echo-trap signals) came up blank. The
  // server downsamples every series to a few hundred points, which SVG draws quickly.
  function traces(chart, series) {
    const out = [];
    if (chart.band && series[chart.band] && series[chart.keys[0]]) {
      const mean = series[chart.keys[0]];
      const std = alignTo(mean.x, series[chart.band]);
      const hi = mean.y.map((v, i) => v + (std[i] || 0));
      const lo = mean.y.map((v, i) => v - (std[i] || 0));
      out.push({ x: mean.x, y: hi, mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false });
      out.push({ x: mean.x, y: lo, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(60,120,200,0.18)", name: "± std" });
    }
    for (const key of chart.keys) {
      const s = series[key];
      // A line through one point draws nothing (an evaluation run once, at the last step): a marker does.
      const name = text(chart.label ? chart.label(key) : key);
      if (s) out.push({ x: s.x, y: s.y, mode: s.x.length === 1 ? "markers" : "lines", name, type: "scatter" });
    }
    return out;
  }

  // Echo-trap alerts (critical) as a shaded step range from where the signal peaked to where the rule
  // fired; every alert also gets a dotted line at its step. Warnings get only the line, so the
  // regions of the rules that make up one echo trap do not stack.
  function alertShapes(alerts) {
    const ordered = [...alerts].sort((a, b) => (a.severity === "critical") - (b.severity === "critical"));
    return ordered.flatMap((a) => {
      const critical = a.severity === "critical";
      const rgb = critical ? "220,40,40" : "240,150,0";
      const line = { type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1, line: { color: `rgba(${rgb},0.9)`, width: 1.5, dash: "dot" } };
      if (!critical) return [line];
      const start = Math.min(a.start_step ?? a.step, a.step);
      return [{ type: "rect", xref: "x", yref: "paper", x0: start - 0.5, x1: a.step + 0.5, y0: 0, y1: 1, fillcolor: `rgba(${rgb},0.08)`, line: { width: 0 }, layer: "below" }, line];
    });
  }

  // Rows a horizontal legend of these names takes in `width` pixels (a swatch and gap, ~7 px a character):
  // the chart grows by as many rows, so no legend is clipped or scrolls.
  function legendRows(names, width) {
    let rows = 1;
    let used = 0;
    for (const name of names) {
      const entry = 46 + 7 * String(name).length;
      if (used && used + entry > width) { rows += 1; used = 0; }
      used += entry;
    }
    return rows;
  }

  // The page's palette (app.css, light or dark as the reader's system asks) for a chart's layout.
  function theme() {
    const css = getComputedStyle(document.documentElement);
    const color = (name) => css.getPropertyValue(name).trim();
    const axis = { gridcolor: color("--grid"), zerolinecolor: color("--line"), linecolor: color("--line") };
    return { paper_bgcolor: color("--card"), plot_bgcolor: color("--card"), font: { color: color("--fg") }, xaxis: axis, yaxis: axis };
  }

  // A layout with the page's palette under it: its axes keep their own settings.
  function themed(layout) {
    const { xaxis, yaxis, ...colors } = theme();
    return { ...colors, ...layout, xaxis: { ...xaxis, ...layout.xaxis }, yaxis: { ...yaxis, ...layout.yaxis } };
  }

  // Every chart has its legend, a single series too: a line alone says nothing of what it counts. Charts of
  // shares (0-1) say so on a fixed axis, so that 0 reads as 0%.
  function layout(chart, traces, shapes, range, width) {
    const xaxis = { title: { text: "step", standoff: 4 }, automargin: true, ...(range ? { range, autorange: false } : { autorange: true }) };
    const yaxis = chart.share ? { range: [-0.02, 1.02], autorange: false, tickformat: ".0%", title: { text: "share", standoff: 4 } } : {};
    const names = traces.filter((t) => t.showlegend !== false).map((t) => t.name);
    const height = 240 + 20 * legendRows(names, (width || 600) - 60);
    return themed({ title: { text: chart.title, font: { size: 13 } }, margin: { l: 48, r: 12, t: 32, b: 8 }, height, xaxis, yaxis, shapes, showlegend: true, legend: { orientation: "h", yref: "container", yanchor: "bottom", y: 0, x: 0 }, hovermode: "x unified" });
  }

  function buckets(element) {
    return Math.max(50, Math.min(1000, Math.round((element.clientWidth || 600) / 3)));
  }

  return { resolve, traces, alertShapes, layout, themed, buckets, text };
})();
