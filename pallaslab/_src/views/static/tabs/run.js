// Run tab: backend, outputs, the comparison with the reference, and where it differs.
// The heatmap helpers live in one object: tab files share a module scope.
const RUN_HEATMAP = (() => {
  const SVG_NS = "http://www.w3.org/2000/svg";

  function svgEl(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null) node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function tileColour(count, nonfinite, perTile) {
    if (nonfinite) return "#8250df";
    if (!count) return "#eef6ee";
    const light = Math.round(200 - 150 * Math.min(1, count / perTile));
    return "rgb(230," + light + "," + light + ")";
  }

  function tileTitle(t, r, c, count, nonfinite) {
    const pooled = t.pool[0] > 1 || t.pool[1] > 1;
    let where;
    if (pooled) where = "cell (" + r + ", " + c + ")";
    else if (t.tiles.length === 1) where = "block " + c;
    else if (t.tiles.length === 2) where = "block (" + r + ", " + c + ")";
    else where = "row " + r + ", block " + c;
    let text = where + ": " + count + " of " + t.perTile + " elements differ";
    if (nonfinite) text += ", " + nonfinite + " NaN/Inf";
    return text;
  }

  function describeTiles(t) {
    const total = t.tiles.reduce((a, b) => a * b, 1);
    let text = t.badTileCount + " of " + total + " blocks of output " + t.output + " differ";
    if (t.pattern) text += ": " + t.pattern;
    if (t.kernel) text += " (blocks of " + t.kernel + "'s " + t.operand + ", (" + t.tileShape.join(", ") + "))";
    if (t.nan || t.inf) text += "; " + t.nan + " NaN and " + t.inf + " Inf where the reference is finite";
    if (t.referenceNonfinite) text += "; the reference itself has " + t.referenceNonfinite + " NaN/Inf";
    return text + ".";
  }

  function renderHeatmap(t) {
    const rows = t.counts.length, cols = rows ? t.counts[0].length : 0;
    const cell = Math.max(6, Math.min(28, Math.floor(560 / Math.max(cols, 1)), Math.floor(280 / Math.max(rows, 1))));
    const svg = svgEl("svg", { width: cols * cell + 2, height: rows * cell + 2, class: "pl-heatmap",
      role: "img", "aria-label": describeTiles(t) });
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const count = t.counts[r][c], bad = t.nonfinite[r][c];
        svg.append(svgEl("rect", { x: c * cell + 1, y: r * cell + 1, width: cell - 1, height: cell - 1,
          fill: tileColour(count, bad, t.perTile), stroke: "#d1d9e0",
          "data-row": r, "data-col": c, "data-count": count },
          svgEl("title", {}, tileTitle(t, r, c, count, bad))));
      }
    }
    const axes = [t.rowLabel ? "rows: " + t.rowLabel : "", t.colLabel ? "columns: " + t.colLabel : ""]
      .filter(Boolean).join(" \u00b7 ");
    const programs = t.badProgramCount
      ? "programs writing them: " + t.badPrograms.map((p) => "(" + p.join(", ") + ")").join(" ") +
        (t.badProgramCount > t.badPrograms.length ? " \u2026" : "")
      : "";
    return h("div", { class: "pl-tiles" },
      h("p", { text: describeTiles(t) }),
      svg,
      h("div", { class: "pl-facts", text: [axes, programs].filter(Boolean).join(" \u00b7 ") }),
      h("div", { class: "pl-facts", text: "red: elements outside tolerance (darker = more of the block); purple: NaN/Inf where the reference is finite; green: block matches" }),
      t.note ? h("p", { class: "pl-notice", text: t.note }) : null);
  }

  return { render: renderHeatmap, describe: describeTiles };
})();

TABS.run = {
  render(root, data) {
    const r = data.result;
    if (!r) return root.append(h("p", { text: data.message }));
    root.append(h("p", {}, "Ran on ", h("b", { text: r.backend }), " (" + r.mode + ") in " + r.seconds + "."));
    if (r.note) root.append(h("p", { class: "pl-notice", text: r.note }));
    if (r.inputs) root.append(h("p", { class: "pl-facts", text: r.inputs }));
    for (const line of r.notices || []) root.append(h("p", { class: "pl-facts", text: line }));
    for (const leak of r.leaks || []) {
      const where = leak.where ? leak.where.label + " line " + leak.where.line + ": " : "";
      root.append(h("p", { class: "pl-warning" }, h("b", { text: leak.title || "Padding leak" }), " \u2014 " + where + leak.text));
    }
    for (const found of r.outOfBounds || []) {
      const where = found.where ? found.where.label + " line " + found.where.line + ": " : "";
      root.append(h("p", { class: "pl-warning" }, h("b", { text: "Out of bounds" }), " \u2014 " + where + found.text));
    }
    for (const check of r.raceChecks || []) {
      root.append(h("p", { class: check.confirmed ? "pl-warning" : "pl-facts" },
        check.confirmed ? h("b", { text: "Race (" + check.backend.toUpperCase() + ")" }) : "",
        (check.confirmed ? " \u2014 " : "") + check.text));
    }
    root.append(table(["output", "type", "values", "min", "max", "NaN", "Inf"],
      r.outputs.map((o) => [o.path, o.type, h("code", { text: o.preview }), o.min, o.max,
        String(o.nan), String(o.inf)])));
    const c = r.comparison;
    if (c) {
      const detail = c.problem || ("max abs error " + c.maxAbs + ", max rel error " + c.maxRel +
        ", " + c.mismatched + " element(s) outside rtol=" + c.rtol + " atol=" + c.atol);
      root.append(h("p", { class: "pl-verdict " + (c.ok ? "pl-pass" : "pl-fail") },
        h("b", { text: c.ok ? "\u2713 matches the reference" : "\u2717 does not match the reference" }),
        ": " + detail));
      for (const t of c.tiles || []) root.append(RUN_HEATMAP.render(t));
    }
  },
};
