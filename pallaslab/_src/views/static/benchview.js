// The live benchmark view: progress, then time / TFLOP/s / GB/s vs size (or config),
// Pallas vs XLA, a roofline and a table. Drawn with SVG elements and text nodes only.
const NS = "http://www.w3.org/2000/svg";
const IMPL_COLOURS = { pallas: "#1976d2", xla: "#bc4c00" };
const OTHER_COLOURS = ["#2e7d32", "#6a1b9a", "#00838f", "#ad1457"];
const METRIC_KEYS = {
  time: { key: "median_ms", label: "time (ms) \u2014 median, bars: p25..p75" },
  tflops: { key: "tflops", label: "TFLOP/s" },
  gbps: { key: "gbps", label: "GB/s" },
};
const W = 640, H = 300, M = { left: 64, right: 16, top: 12, bottom: 58 };

function s(tag, attrs, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function num(v, digits = 3) {
  if (typeof v !== "number" || !isFinite(v)) return "-";
  if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
  if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(1);
  return String(Number(v.toPrecision(digits)));
}

function colourOf(impl, impls) {
  return IMPL_COLOURS[impl] || OTHER_COLOURS[impls.indexOf(impl) % OTHER_COLOURS.length];
}

function makeScale(lo, hi, r0, r1, log) {
  let a = log ? Math.log10(lo) : lo, b = log ? Math.log10(hi) : hi;
  if (!(b > a)) { a -= log ? 0.5 : Math.abs(a) * 0.5 || 1; b += log ? 0.5 : Math.abs(b) * 0.5 || 1; }
  const f = (v) => r0 + ((log ? Math.log10(v) : v) - a) / (b - a) * (r1 - r0);
  f.domain = [log ? 10 ** a : a, log ? 10 ** b : b];
  return f;
}

function niceTicks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) { const v = m * 10 ** e; if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v); }
    }
    return out.length > 8 ? out.filter((v) => Math.abs(Math.log10(v) % 1) < 1e-9) : out;
  }
  const span = hi - lo || Math.abs(hi) || 1;
  const step0 = 10 ** Math.floor(Math.log10(span / 5));
  const step = [1, 2, 5, 10].map((m) => m * step0).find((st) => span / st <= 6) || step0 * 10;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

// Tick labels may hold several lines (a config's "A=1, B=2" is drawn one name per line);
// the plot grows downwards to fit them. Returns the svg's height.
function axesFrame(svg, x, y, yTicks, xTicks, xLabel, yLabel) {
  for (const t of yTicks) {
    svg.append(s("line", { x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), class: "pl-gridline" }));
    svg.append(s("text", { x: M.left - 6, y: y(t) + 3, "text-anchor": "end" }, num(t)));
  }
  let lines = 1;
  for (const [pos, label] of xTicks) {
    svg.append(s("line", { x1: pos, x2: pos, y1: H - M.bottom, y2: H - M.bottom + 4, class: "pl-axis" }));
    const parts = String(label).split(", ");
    lines = Math.max(lines, parts.length);
    svg.append(s("text", { x: pos, y: H - M.bottom + 14, "text-anchor": "middle" },
      parts.map((part, k) => s("tspan", { x: pos, dy: k ? 11 : 0 }, part))));
  }
  const height = H + (lines - 1) * 11;
  svg.setAttribute("height", String(height));
  svg.append(s("line", { x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom, class: "pl-axis" }));
  svg.append(s("line", { x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom, class: "pl-axis" }));
  svg.append(s("text", { x: (M.left + W - M.right) / 2, y: height - 6, "text-anchor": "middle" }, xLabel));
  svg.append(s("text", { x: 12, y: (M.top + H - M.bottom) / 2, "text-anchor": "middle",
    transform: "rotate(-90 12 " + (M.top + H - M.bottom) / 2 + ")" }, yLabel));
}

function metricPlot(plan, rows, metric) {
  const { key, label } = METRIC_KEYS[metric];
  const tune = plan.kind === "tune";
  const svg = s("svg", { width: W, height: H, class: "pl-plot", "data-metric": metric });
  const pointRows = rows.filter((r) => !(tune && r.impl === "xla"));
  const categorical = tune || pointRows.some((r) => r.x === null || r.x === undefined);
  const points = [...new Set(pointRows.map((r) => r.point))];
  const measured = rows.filter((r) => typeof r[key] === "number" && isFinite(r[key]) && r[key] > 0);
  if (!measured.length && !pointRows.length) {
    svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "waiting for the first point\u2026"));
    return svg;
  }
  const xs = pointRows.filter((r) => typeof r.x === "number").map((r) => r.x);
  const xLog = !categorical && xs.length && Math.min(...xs) > 0 && Math.max(...xs) / Math.min(...xs) >= 8;
  const band = (W - M.left - M.right) / Math.max(points.length, 1);
  const x = categorical
    ? (r) => M.left + band * (points.indexOf(r.point) + 0.5)
    : ((f) => (r) => f(r.x))(makeScale(Math.min(...xs), Math.max(...xs), M.left + 20, W - M.right - 20, xLog));
  const ys = [];
  for (const r of measured) {
    ys.push(r[key]);
    if (metric === "time") { if (r.p25_ms > 0) ys.push(r.p25_ms); if (r.p75_ms > 0) ys.push(r.p75_ms); }
  }
  const yLo = ys.length ? Math.min(...ys) : 1, yHi = ys.length ? Math.max(...ys) : 10;
  const yLog = yLo > 0 && yHi / yLo > 20;
  const y = makeScale(yLog ? yLo / 1.3 : Math.min(0, yLo), yHi * (yLog ? 1.3 : 1.08), H - M.bottom, M.top, yLog);
  const xTicks = categorical
    ? points.map((p) => [M.left + band * (points.indexOf(p) + 0.5), p])
    : [...new Set(xs)].slice(0, 14).map((v) => [x({ x: v }), num(v)]);
  axesFrame(svg, x, y, niceTicks(y.domain[0], y.domain[1], yLog), xTicks,
    categorical ? plan.x_label : plan.x_label + (xLog ? " (log scale)" : ""), label + (yLog ? " (log)" : ""));
  const impls = [...new Set(rows.map((r) => r.impl))];
  for (const impl of impls) {
    const colour = colourOf(impl, impls);
    const mine = measured.filter((r) => r.impl === impl);
    if (tune && impl === "xla") {
      for (const r of mine) {
        svg.append(s("line", { x1: M.left, x2: W - M.right, y1: y(r[key]), y2: y(r[key]), stroke: colour,
          "stroke-dasharray": "6 4", "data-impl": impl },
          s("title", {}, "XLA baseline: " + num(r[key]) + " " + label)));
      }
      continue;
    }
    if (!categorical && mine.length > 1) {
      const sorted = [...mine].sort((a, b) => a.x - b.x);
      svg.append(s("polyline", { points: sorted.map((r) => x(r) + "," + y(r[key])).join(" "),
        fill: "none", stroke: colour, "stroke-width": 2 }));
    }
    for (const r of mine) {
      const cx = x(r) + (categorical && impls.length > 1 ? (impls.indexOf(impl) - (impls.length - 1) / 2) * 6 : 0);
      if (metric === "time" && r.p25_ms > 0 && r.p75_ms > 0) {
        svg.append(s("line", { x1: cx, x2: cx, y1: y(r.p25_ms), y2: y(r.p75_ms), stroke: colour }));
      }
      const wrong = r.status === "wrong";
      svg.append(s("circle", { cx, cy: y(r[key]), r: 4, fill: wrong ? "#fff" : colour,
        stroke: wrong ? "#cf222e" : colour, "stroke-width": wrong ? 2 : 1, "data-impl": impl, "data-point": r.point },
        s("title", {}, impl + " " + r.point + ": " + num(r[key]) + " " + label +
          (r.cached ? " (cached)" : "") + (wrong ? " \u2014 WRONG: " + r.error : ""))));
    }
  }
  for (const r of rows.filter((r) => String(r.status || "ok").startsWith("failed"))) {
    if (!points.includes(r.point)) continue;
    const cx = categorical ? x(r) : x({ x: r.x });
    svg.append(s("text", { x: cx, y: H - M.bottom - 4, "text-anchor": "middle", class: "pl-failed-mark",
      style: "fill:#cf222e;font-size:16px;font-weight:700" }, "\u2717", s("title", {}, r.point + ": " + r.status + ": " + r.error)));
  }
  return svg;
}

function roofline(plan, rows) {
  const wrap = h("div", {});
  const placed = rows.filter((r) => r.flops > 0 && r.bytes > 0 && r.median_ms > 0);
  const intensities = [...new Set(placed.map((r) => r.flops / r.bytes))];
  if (!plan.chip) {
    wrap.append(h("p", { class: "pl-notice", text: "No roof to draw: this device (" + plan.device +
      ") is not in pallaslab's hardware table; pass chip=\"H100\" (or \"v5e\" \u2026) to choose one." }));
    if (intensities.length) wrap.append(h("p", { text: "Arithmetic intensity: " + intensities.map((v) => num(v) + " FLOP/byte").join(", ") }));
    return wrap;
  }
  const peak = plan.peak_flops, bw = plan.peak_bandwidth, ridge = peak / bw;
  const lo = Math.min(ridge / 16, ...intensities.map((v) => v / 4)), hi = Math.max(ridge * 16, ...intensities.map((v) => v * 4));
  const x = makeScale(lo, hi, M.left, W - M.right, true);
  const achieved = placed.map((r) => r.flops / (r.median_ms / 1e3) / 1e12);
  const yHi = peak / 1e12 * 2, yLo = Math.min(bw * lo / 1e12, ...achieved.filter((v) => v > 0)) / 2;
  const y = makeScale(yLo, yHi, H - M.bottom, M.top, true);
  const svg = s("svg", { width: W, height: H, class: "pl-plot", "data-metric": "roofline" });
  const xt = niceTicks(lo, hi, true).filter((v) => Math.abs(Math.log10(v) % 1) < 1e-9).map((v) => [x(v), num(v)]);
  axesFrame(svg, x, y, niceTicks(yLo, yHi, true), xt, "arithmetic intensity (FLOP/byte, log)", "TFLOP/s (log)");
  const roof = [];
  for (let k = 0; k <= 64; k++) { const v = lo * (hi / lo) ** (k / 64); roof.push(x(v) + "," + y(Math.min(peak, v * bw) / 1e12)); }
  svg.append(s("polyline", { points: roof.join(" "), fill: "none", stroke: "#333", "stroke-width": 2, class: "pl-roof" },
    s("title", {}, plan.peak_label)));
  svg.append(s("text", { x: x(ridge) + 4, y: y(peak / 1e12) - 4 }, plan.chip + " roof \u00b7 ridge " + num(ridge) + " FLOP/B"));
  const impls = [...new Set(rows.map((r) => r.impl))];
  if (plan.backend === "cpu") {
    for (const v of intensities) {
      svg.append(s("line", { x1: x(v), x2: x(v), y1: M.top, y2: H - M.bottom, stroke: "#1976d2", "stroke-dasharray": "4 3" },
        s("title", {}, "the kernel's arithmetic intensity: " + num(v) + " FLOP/byte")));
    }
    wrap.append(svg, h("p", { class: "pl-notice", text: "CPU interpret timings are not placed on a GPU/TPU roof. " +
      "The dashed lines show where the kernel's arithmetic intensity sits: left of the ridge it is memory-bound, right of it compute-bound." }));
    return wrap;
  }
  placed.forEach((r, i) => {
    svg.append(s("circle", { cx: x(r.flops / r.bytes), cy: y(achieved[i]), r: 4, fill: colourOf(r.impl, impls), "data-impl": r.impl },
      s("title", {}, r.impl + " " + r.point + ": " + num(achieved[i]) + " TFLOP/s, " + num(r.pct_of_peak, 2) + "% of the roof")));
  });
  wrap.append(svg);
  return wrap;
}

const TABLE_COLUMNS = [["impl", "impl"], ["point", "point"], ["median_ms", "median ms"], ["p25_ms", "p25"],
  ["p75_ms", "p75"], ["tflops", "TFLOP/s"], ["gbps", "GB/s"], ["pct_of_peak", "% of peak"],
  ["compile_ms", "compile ms"], ["status", "status"]];

function rowsTable(rows) {
  return h("div", { class: "pl-bench-table" }, table(TABLE_COLUMNS.map((c) => c[1]), rows.map((r) =>
    TABLE_COLUMNS.map(([k]) => (typeof r[k] === "number" ? num(r[k], 4) : String(r[k] ?? "")) + (k === "status" && r.cached ? " (cached)" : "")))));
}

function bestOf(rows) {
  const ok = rows.filter((r) => r.impl === "pallas" && r.status === "ok" && r.correct !== false && r.median_ms > 0);
  return ok.length ? ok.reduce((a, b) => (b.median_ms < a.median_ms ? b : a)) : null;
}

function render({ model, el }) {
  const root = h("div", { class: "pallaslab pl-bench" });
  const draw = () => {
    clear(root);
    const plan = model.get("plan") || {}, rows = model.get("rows") || [], p = model.get("progress") || {};
    const metric = model.get("metric") || "time";
    root.append(h("div", { class: "pl-header" },
      h("span", { class: "pl-brand", text: "pallaslab" }),
      h("span", { class: "pl-title", text: plan.title || "benchmark" }),
      plan.device ? h("span", { class: "pl-badge", text: plan.backend + " \u00b7 " + plan.device }) : null,
      plan.chip ? h("span", { class: "pl-badge", text: "roof: " + plan.chip }) : null));
    if (plan.note) root.append(h("div", { class: "pl-cpu-label", role: "note", text: plan.note }));
    const total = p.total || 0, done = p.done || 0;
    const pct = total ? Math.round(100 * done / total) : 0;
    let status = done + " / " + total;
    if (p.state === "running") {
      status += (p.current ? " \u00b7 " + p.current : "") + " \u00b7 " + num(p.elapsedS, 2) + " s" +
        (p.etaS !== null && p.etaS !== undefined ? " \u00b7 ~" + num(p.etaS, 2) + " s left" : "");
    } else if (p.state) {
      status += " \u00b7 " + p.state + (p.message ? ": " + p.message : "");
    }
    root.append(h("div", { class: "pl-progress", role: "progressbar", "aria-valuenow": pct, "aria-valuemin": 0, "aria-valuemax": 100 },
      h("div", { class: "pl-progress-bar" }, h("div", { class: "pl-progress-fill pl-" + (p.state || ""), style: "width:" + pct + "%" })),
      h("span", { class: "pl-progress-text", text: status })));
    const bar = h("div", { class: "pl-toolbar", style: "margin: 4px 10px" });
    for (const [id, title] of [["time", "Time"], ["tflops", "TFLOP/s"], ["gbps", "GB/s"], ["roofline", "Roofline"], ["table", "Table"]]) {
      bar.append(h("button", { class: "pl-tab" + (id === metric ? " pl-selected" : ""), dataset: { metric: id }, text: title,
        onclick: () => { model.set("metric", id); model.save_changes(); } }));
    }
    root.append(bar);
    if (metric === "table") root.append(rowsTable(rows));
    else if (metric === "roofline") root.append(roofline(plan, rows));
    else root.append(metricPlot(plan, rows, metric in METRIC_KEYS ? metric : "time"));
    const impls = [...new Set(rows.map((r) => r.impl))];
    root.append(h("div", { class: "pl-legend" }, impls.map((i) =>
      h("span", {}, h("span", { class: "pl-swatch", style: "background:" + colourOf(i, impls) }), i === "xla" ? "XLA (reference under jax.jit)" : i))));
    if (plan.kind === "tune" && p.state && p.state !== "running") {
      const best = bestOf(rows);
      root.append(h("p", { style: "margin: 4px 10px" }, best ? h("b", { text: "Best: " + best.point + " (" + num(best.median_ms, 4) + " ms)" })
        : h("b", { text: "No config ran and matched the reference." })));
    }
    const failures = rows.filter((r) => r.error);
    if (failures.length) {
      root.append(h("div", { class: "pl-bench-errors" }, failures.map((r) =>
        h("div", {}, h("b", { text: r.point + ": " + r.status }), " ", h("code", { text: r.error })))));
    }
    if (plan.peak_label && metric === "roofline") root.append(h("p", { class: "pl-facts", style: "margin: 4px 10px", text: "Roof: " + plan.peak_label }));
  };
  const events = ["change:rows", "change:progress", "change:plan", "change:metric"];
  for (const e of events) model.on(e, draw);
  draw();
  el.append(root);
  return () => { for (const e of events) model.off(e, draw); };
}

export default { render };
