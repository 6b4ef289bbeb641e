// Tiles tab: every operand cut into blocks, lit program by program; figures of merit;
// the element-level loads and stores of one program (asked of Python on demand).
//
// Stable hooks for browser tests: the pane root has data-program ("i,j"), data-position
// and data-highlighted (operand blocks lit); program cells have data-program; the scrub
// input, play button, schedule and chip selectors have data-role; every operand canvas
// has data-operand and data-block (the lit block's ranges, "r0:r1,c0:c1"); the accesses
// panel has data-role="accesses" and data-status ("idle", "loading", "ready", "error").
const TILES_ROLE = {
  in: ["#dbe9fb", "#0b4da2"],
  out: ["#fde4cf", "#a3400a"],
  prefetch: ["#eadcf8", "#5a2e9c"],
};
const TILES_UNREAD = "#f6f8fa";
const TILES_HIGHLIGHT = "rgba(255, 211, 61, 0.75)";
const TILES_PADDING = "#cf222e";
const TILES_SPEEDS = [1, 8, 64, 512];
const TILES_ACCESS_COLOURS = {
  read: "#9ecbff", readTwice: "#0550ae", write: "#fb8f44", writeTwice: "#bc4c00",
  both: "#8250df", untouched: "#eaeef2", masked: "#8c959f", outside: "#cf222e",
};
const TILES_TYPED = {
  u8: Uint8Array, u16: Uint16Array, i16: Int16Array, u32: Uint32Array, i32: Int32Array,
  f64: Float64Array,
};

function tilesDecode(enc) {
  const text = atob(enc.data);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  const data = new TILES_TYPED[enc.dtype](bytes.buffer);
  const shape = enc.shape;
  const strides = new Array(shape.length);
  let step = 1;
  for (let a = shape.length - 1; a >= 0; a--) { strides[a] = step; step *= shape[a]; }
  return { data, shape, strides };
}

// The value for one program of an array kept only along the grid axes it varies on.
function tilesAt(array, index) {
  let k = 0;
  for (let a = 0; a < array.shape.length; a++) if (array.shape[a] > 1) k += index[a] * array.strides[a];
  return array.data[k];
}

function tilesMix(role, count, peak) {
  if (count <= 0) return TILES_UNREAD;
  const [light, dark] = TILES_ROLE[role] || ["#e6e6e6", "#333333"];
  const t = 0.25 + 0.6 * (peak > 1 ? (count - 1) / (peak - 1) : 0);
  const channel = (i) => Math.round(parseInt(light.slice(i, i + 2), 16) * (1 - t) + parseInt(dark.slice(i, i + 2), 16) * t);
  return "rgb(" + [1, 3, 5].map(channel).join(",") + ")";
}

function tilesUnravel(position, grid) {
  const index = new Array(grid.length);
  for (let a = grid.length - 1; a >= 0; a--) { index[a] = position % grid[a]; position = Math.floor(position / grid[a]); }
  return index;
}

function tilesProgramText(index) {
  return "(" + index.join(", ") + (index.length === 1 ? "," : "") + ")";
}

function tilesSearch(edges, value) {
  // The cell [edges[i], edges[i+1]) holding value (clipped to the array).
  let lo = 0, hi = edges.length - 2;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (edges[mid] <= value) lo = mid; else hi = mid - 1;
  }
  return lo;
}

function tilesHatch(ctx, colour) {
  const tile = document.createElement("canvas");
  tile.width = tile.height = 8;
  const t = tile.getContext("2d");
  t.strokeStyle = colour || TILES_PADDING;
  t.lineWidth = 2;
  t.beginPath(); t.moveTo(0, 8); t.lineTo(8, 0); t.stroke();
  return ctx.createPattern(tile, "repeat");
}

// One operand: a canvas of its blocks, shaded by read counts; lit for a program.
class TilesOperand {
  constructor(op, kernel) {
    this.op = op;
    this.kernel = kernel;
    this.starts = op.starts.map(tilesDecode);
    this.extents = op.extents.map(tilesDecode);
    this.edges = op.coverage.edges.map((e) => tilesDecode(e).data);
    this.counts = tilesDecode(op.coverage.counts);
    this.rows = op.dims.rows;
    this.cols = op.dims.cols;
    this.sliced = op.dims.sliced;
    this.follow = true;
    this.slice = {};
    for (const d of this.sliced) this.slice[d] = 0;
    this.bases = new Map();
    const [r0, r1] = op.bounds.rows, [c0, c1] = op.bounds.cols;
    this.span = { r0, r1, c0, c1 };
    const spanR = r1 - r0, spanC = c1 - c0;
    let scale = Math.min(360 / spanC, 260 / spanR);
    let width = spanC * scale, height = this.rows === null ? 28 : spanR * scale;
    width = Math.max(width, 24); height = Math.max(height, 24);
    this.width = Math.round(width); this.height = Math.round(height);
    this.sx = this.width / spanC; this.sy = this.height / spanR;
    const ratio = window.devicePixelRatio || 1;
    this.ratio = ratio;
    this.canvas = h("canvas", {
      class: "pl-tiles-canvas", width: Math.round(this.width * ratio), height: Math.round(this.height * ratio),
      style: "width:" + this.width + "px;height:" + this.height + "px",
      dataset: { operand: op.index, role: op.role },
    });
    this.hatch = tilesHatch(this.canvas.getContext("2d"));
    this.info = h("div", { class: "pl-tiles-info" });
    this.hover = h("div", { class: "pl-tiles-hover" });
    this.canvas.addEventListener("mousemove", (e) => this.onHover(e));
    this.canvas.addEventListener("mouseleave", () => { this.hover.textContent = ""; });
    const controls = this.sliced.map((d) => {
      const n = op.shape[d];
      const input = h("input", {
        type: "range", min: 0, max: n - 1, value: 0, dataset: { role: "slice", dim: d },
        oninput: (e) => { this.follow = false; this.slice[d] = Number(e.target.value); this.redraw(); },
      });
      const follow = h("button", { class: "pl-tiles-small", text: "follow", title: "Cut through the program's block",
        onclick: () => { this.follow = true; this.redraw(); } });
      return h("label", { class: "pl-tiles-slice" }, "dim " + d + " at ", h("span", { dataset: { role: "slice-value", dim: d } }), input, follow);
    });
    this.sliceInputs = controls;
    const title = h("div", { class: "pl-tiles-title" },
      h("span", { class: "pl-role pl-role-" + op.role, text: op.role }), " ",
      h("b", { text: op.label }), " " + op.type + " \u00b7 block " + op.block);
    const map = h("div", { class: "pl-tiles-map" }, h("code", { text: op.indexMap }));
    const reads = op.coverage;
    const legend = h("div", { class: "pl-tiles-legend" },
      h("span", { class: "pl-tiles-swatch", style: "background:" + tilesMix(op.role, 1, reads.max) }),
      (op.role === "out" ? " written by " : " read by ") + (reads.min === reads.max ? String(reads.min) : reads.min + "\u2013" + reads.max + " (mean " + reads.mean + ")") + " program" + (reads.max === 1 ? "" : "s") + " per element",
      reads.never ? " \u00b7 " + reads.never + " element(s) never touched" : "",
      reads.merged ? " \u00b7 cells merged for drawing" : "");
    this.el = h("div", { class: "pl-tiles-operand", dataset: { operand: op.index } },
      title, map, controls, this.canvas, this.hover, this.info, legend);
  }

  block(index) {
    const spans = [];
    for (let d = 0; d < this.starts.length; d++) {
      const s = tilesAt(this.starts[d], index);
      spans.push([s, s + tilesAt(this.extents[d], index)]);
    }
    return spans;
  }

  base(key, cut) {
    if (this.bases.has(key)) return this.bases.get(key);
    const off = document.createElement("canvas");
    off.width = this.canvas.width; off.height = this.canvas.height;
    const g = off.getContext("2d");
    g.fillStyle = "#ffffff";
    g.fillRect(0, 0, off.width, off.height);
    // Cells are painted on whole device pixels: no seams between neighbours.
    const X = (c) => Math.round(this.x(c) * this.ratio), Y = (r) => Math.round(this.y(r) * this.ratio);
    const rowEdges = this.rows === null ? [0, 1] : this.edges[this.rows];
    const colEdges = this.edges[this.cols];
    const peak = Math.max(this.op.coverage.max, 1);
    const strides = this.counts.strides;
    let offset = 0;
    for (const d of this.sliced) offset += cut[d] * strides[d];
    const rowStride = this.rows === null ? 0 : strides[this.rows];
    const colStride = strides[this.cols];
    for (let i = 0; i + 1 < rowEdges.length; i++) {
      const y0 = Y(rowEdges[i]), y1 = Math.max(Y(rowEdges[i + 1]), y0 + 1);
      let j = 0;
      while (j + 1 < colEdges.length) {
        const count = this.counts.data[offset + i * rowStride + j * colStride];
        let end = j + 1;
        while (end + 1 < colEdges.length && this.counts.data[offset + i * rowStride + end * colStride] === count) end++;
        g.fillStyle = tilesMix(this.op.role, count, peak);
        g.fillRect(X(colEdges[j]), y0, Math.max(X(colEdges[end]) - X(colEdges[j]), 1), y1 - y0);
        j = end;
      }
    }
    // Block boundaries, while they stay a few pixels apart.
    g.fillStyle = "rgba(255,255,255,0.9)";
    const top = Y(rowEdges[0]), bottom = Y(rowEdges[rowEdges.length - 1]);
    const left = X(colEdges[0]), right = X(colEdges[colEdges.length - 1]);
    if (this.width / colEdges.length >= 4) for (const c of colEdges.slice(1, -1)) g.fillRect(X(c), top, 1, bottom - top);
    if (this.rows !== null && this.height / rowEdges.length >= 4) for (const r of rowEdges.slice(1, -1)) g.fillRect(left, Y(r), right - left, 1);
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    g.strokeStyle = "#59636e";
    g.lineWidth = this.ratio;
    g.strokeRect(X(0) + 0.5, Y(0) + 0.5, X(this.op.shape[this.cols]) - X(0) - 1, Y(nRows) - Y(0) - 1);
    if (this.bases.size > 16) this.bases.clear();
    this.bases.set(key, off);
    return off;
  }

  x(col) { return (col - this.span.c0) * this.sx; }
  y(row) { return this.rows === null ? (row - 0) * this.height : (row - this.span.r0) * this.sy; }

  // Draws the operand with `index`'s block lit; `previous` (while playing) dashed.
  draw(index, previous) {
    this.current = index;
    this.previous = previous;
    return this.redraw();
  }

  redraw() {
    const index = this.current;
    const spans = this.block(index);
    const cut = {};
    for (const d of this.sliced) {
      const n = this.op.shape[d];
      const at = this.follow ? Math.min(Math.max(spans[d][0], 0), n - 1) : this.slice[d];
      this.slice[d] = at;
      cut[d] = tilesSearch(this.edges[d], at);
      const label = this.el.querySelector('[data-role="slice-value"][data-dim="' + d + '"]');
      if (label) label.textContent = String(at);
      const input = this.el.querySelector('input[data-role="slice"][data-dim="' + d + '"]');
      if (input) input.value = String(at);
    }
    const key = this.sliced.map((d) => cut[d]).join(",");
    const g = this.canvas.getContext("2d");
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.drawImage(this.base(key, cut), 0, 0);
    g.scale(this.ratio, this.ratio);
    const lit = this.sliced.every((d) => spans[d][0] <= this.slice[d] && this.slice[d] < spans[d][1]);
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    const nCols = this.op.shape[this.cols];
    const [r0, r1] = this.rows === null ? [0, 1] : spans[this.rows];
    const [c0, c1] = spans[this.cols];
    if (this.previous && lit) {
      const p = this.block(this.previous);
      const [pr0, pr1] = this.rows === null ? [0, 1] : p[this.rows];
      const [pc0, pc1] = p[this.cols];
      g.setLineDash([4, 3]); g.strokeStyle = "#24292f"; g.lineWidth = 1;
      g.strokeRect(this.x(pc0) + 0.5, this.y(pr0) + 0.5, this.x(pc1) - this.x(pc0) - 1, this.y(pr1) - this.y(pr0) - 1);
      g.setLineDash([]);
    }
    const inside = [Math.max(r0, 0), Math.min(r1, nRows), Math.max(c0, 0), Math.min(c1, nCols)];
    const hasInside = inside[1] > inside[0] && inside[3] > inside[2];
    if (lit && (r0 < 0 || r1 > nRows || c0 < 0 || c1 > nCols)) {
      // The part of the block hanging over the array: padding, hatched.
      g.save();
      g.beginPath();
      g.rect(this.x(c0), this.y(r0), this.x(c1) - this.x(c0), this.y(r1) - this.y(r0));
      g.rect(this.x(inside[2]), this.y(inside[0]), this.x(inside[3]) - this.x(inside[2]), this.y(inside[1]) - this.y(inside[0]));
      g.fillStyle = this.hatch;
      g.fill("evenodd");
      g.setLineDash([3, 2]); g.strokeStyle = TILES_PADDING;
      g.strokeRect(this.x(c0) + 0.5, this.y(r0) + 0.5, this.x(c1) - this.x(c0) - 1, this.y(r1) - this.y(r0) - 1);
      g.restore();
    }
    if (lit && hasInside) {
      const x0 = this.x(inside[2]), y0 = this.y(inside[0]);
      const w = Math.max(this.x(inside[3]) - x0, 3), hgt = Math.max(this.y(inside[1]) - y0, 3);
      if (w < 8 || hgt < 8) {
        // A block of a few pixels: cross-hairs lead the eye to it.
        g.strokeStyle = "rgba(191, 135, 0, 0.9)"; g.lineWidth = 1;
        g.beginPath();
        g.moveTo(x0 + w / 2, 0); g.lineTo(x0 + w / 2, this.height);
        if (this.rows !== null) { g.moveTo(0, y0 + hgt / 2); g.lineTo(this.width, y0 + hgt / 2); }
        g.stroke();
      }
      g.fillStyle = TILES_HIGHLIGHT;
      g.fillRect(x0, y0, w, hgt);
      g.strokeStyle = "#111111"; g.lineWidth = w < 8 || hgt < 8 ? 1 : 2;
      g.strokeRect(x0 + 0.5, y0 + 0.5, w - 1, hgt - 1);
    }
    const ranges = spans.map(([a, b], d) => Math.min(Math.max(a, 0), this.op.shape[d]) + ":" + Math.min(Math.max(b, 0), this.op.shape[d]));
    this.canvas.dataset.block = lit ? ranges.join(",") : "";
    this.canvas.dataset.lit = lit && hasInside ? "true" : "false";
    const pad = spans.map(([a, b], d) => [Math.max(0, Math.min(b, 0) - a), Math.max(0, b - Math.max(a, this.op.shape[d]))]);
    const padText = pad.some(([x, y]) => x || y) ? " \u00b7 padding " + pad.map(([x, y]) => x + "+" + y).join(", ") + " (before+after)" : "";
    let reuse = "";
    if (this.previous) {
      const same = JSON.stringify(this.block(this.previous)) === JSON.stringify(spans);
      reuse = this.kernel.schedule === "gpu"
        ? " \u00b7 this program loads its own block"
        : same ? " \u00b7 same block as the previous program: no copy" : " \u00b7 a new block: copied " + (this.op.role === "out" ? "out when done" : "in");
    }
    this.info.textContent = "[" + ranges.join(", ") + "]" + padText + reuse;
    return lit && hasInside;
  }

  onHover(event) {
    const rect = this.canvas.getBoundingClientRect();
    const col = Math.floor((event.clientX - rect.left) / this.sx + this.span.c0);
    const row = this.rows === null ? 0 : Math.floor((event.clientY - rect.top) / this.sy + this.span.r0);
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    if (col < 0 || row < 0 || col >= this.op.shape[this.cols] || row >= nRows) {
      this.hover.textContent = "outside the array";
      return;
    }
    let k = 0;
    for (const d of this.sliced) k += tilesSearch(this.edges[d], this.slice[d]) * this.counts.strides[d];
    if (this.rows !== null) k += tilesSearch(this.edges[this.rows], row) * this.counts.strides[this.rows];
    k += tilesSearch(this.edges[this.cols], col) * this.counts.strides[this.cols];
    const where = this.rows === null ? "[" + col + "]" : "[" + row + ", " + col + "]";
    const count = this.counts.data[k];
    this.hover.textContent = "element " + where + ": " + (this.op.role === "out" ? "written by " : "read by ") + count + " program" + (count === 1 ? "" : "s");
  }
}

function tilesFigures(kernel, view) {
  const box = h("div", { class: "pl-tiles-figures" });
  const draw = () => {
    clear(box);
    const figures = kernel.merit[view.schedule];
    const rows = figures.operands.filter((o) => o.access === "pipelined" || o.access === "prefetch").map((o) => [
      h("span", { class: "pl-role pl-role-" + o.role, text: o.role }), o.label, o.reads.join(" / "),
      String(o.transfers), o.bytesText, o.minBytesText, o.ratio + "\u00d7", o.blockText + " \u00d7" + o.buffers,
    ]);
    rows.push([h("b", { text: "all" }), "", "", "", figures.bytesText, figures.minBytesText, figures.ratio + "\u00d7", figures.workingSetText]);
    box.append(table(["role", "operand", "reads min / mean / max", "copies", "HBM bytes", "minimum", "ratio", "VMEM / smem"], rows));
    const fits = kernel.fits[view.schedule];
    const chosen = fits.find((f) => f.chip === view.chip[view.schedule]) || fits[0];
    const select = h("select", { dataset: { role: "chip" }, onchange: (e) => { view.chip[view.schedule] = e.target.value; draw(); } },
      fits.map((f) => h("option", { value: f.chip, text: f.chip, selected: f.chip === chosen.chip ? "selected" : null })));
    const facts = [
      "working set per program " + figures.workingSetText + " (blocks \u00d7 buffers + scratch) = " +
        (chosen.share === null ? "?" : chosen.share > 0 && chosen.share < 0.001 ? "<0.1%" : Math.round(chosen.share * 1000) / 10 + "%") + " of " + chosen.capacityText + " " + chosen.capacityName +
        (chosen.fits ? "" : " \u2014 does not fit"),
      "work " + figures.flopsText + (figures.flopsSource ? " (" + figures.flopsSource + (figures.flopsExact ? "" : ", estimate") + ")" : ""),
    ];
    if (figures.intensity !== null) {
      facts.push("arithmetic intensity " + figures.intensity + " FLOP/byte vs ridge " + chosen.ridge + " (" + chosen.peakText + " " + chosen.peakName + " / " + chosen.bandwidthText + ")");
      facts.push(chosen.bound + "-bound: at most " + chosen.attainableText + ", at least " + chosen.secondsText);
    }
    box.append(h("p", { class: "pl-tiles-chip" }, "On ", select, ":"),
      h("ul", { class: "pl-tiles-facts" }, facts.map((f) => h("li", { text: f }))));
    if (chosen.notes.length) box.append(h("ul", { class: "pl-tiles-notes" }, chosen.notes.map((n) => h("li", { class: "pl-notice", text: n }))));
    box.dataset.schedule = view.schedule;
    box.dataset.chip = chosen.chip;
  };
  view.redrawFigures = draw;
  draw();
  return box;
}

function tilesAccessCanvas(ref, onReady) {
  const reads = tilesDecode(ref.reads), writes = tilesDecode(ref.writes);
  const masked = tilesDecode(ref.masked), inside = tilesDecode(ref.inside);
  const [rows, cols] = reads.shape;
  const fit = Math.max(1, Math.min(24, Math.floor(360 / cols), Math.floor(240 / rows)));
  // A strip (one row) stays tall enough to see; a 2-D buffer keeps square elements.
  const cell = fit, cellH = rows === 1 ? Math.max(fit, 16) : fit;
  const canvas = h("canvas", { class: "pl-tiles-canvas", width: cols * cell, height: rows * cellH, dataset: { ref: ref.label } });
  const g = canvas.getContext("2d");
  const C = TILES_ACCESS_COLOURS;
  const hatch = tilesHatch(g, C.masked);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const k = i * cols + j;
      const r = reads.data[k], w = writes.data[k], m = masked.data[k], inBlock = inside.data[k] > 0;
      let colour = null;
      if (!inBlock) colour = r || w ? C.outside : m ? hatch : null;
      else if (r && w) colour = C.both;
      else if (r) colour = r >= 2 ? C.readTwice : C.read;
      else if (w) colour = w >= 2 ? C.writeTwice : C.write;
      else colour = m ? C.masked : C.untouched;
      if (colour === null) continue;
      g.fillStyle = colour;
      g.fillRect(j * cell, i * cellH, cell, cellH);
    }
  }
  // The block's outline, when lanes reached beyond it (1-D and 2-D buffers).
  const o = ref.origin, s = ref.shape;
  if (s.length && s.length <= 2 && inside.data.some((v) => v === 0)) {
    const r0 = s.length === 2 ? -o[0] : 0, c0 = -o[s.length - 1];
    const hgt = s.length === 2 ? s[0] : 1, wid = s[s.length - 1];
    g.strokeStyle = "#24292f"; g.setLineDash([3, 2]);
    g.strokeRect(c0 * cell / ref.pool[1] + 0.5, r0 * cellH / ref.pool[0] + 0.5, wid * cell / ref.pool[1] - 1, hgt * cellH / ref.pool[0] - 1);
  }
  onReady && onReady(canvas, cell, cellH);
  return canvas;
}

function tilesAccesses(data, root) {
  clear(root);
  if (data.error) {
    root.dataset.status = "error";
    root.append(h("p", { class: "pl-problem", text: data.error }));
    return;
  }
  root.dataset.status = "ready";
  root.dataset.program = data.program.join(",");
  const C = TILES_ACCESS_COLOURS;
  const legend = [["read once", C.read], ["read twice or more", C.readTwice], ["written", C.write], ["written twice or more", C.writeTwice],
    ["read and written", C.both], ["never touched", C.untouched], ["masked-out lane (hatched beyond the block)", C.masked],
    ["enabled lane outside the block", C.outside]];
  root.append(h("div", { class: "pl-tiles-legend" }, legend.map(([label, colour]) =>
    h("span", { class: "pl-tiles-key" }, h("span", { class: "pl-tiles-swatch", style: "background:" + colour }), " " + label))));
  const canvases = [];
  const refs = h("div", { class: "pl-tiles-operands" });
  data.refs.forEach((ref, k) => {
    const s = ref.summary;
    if (!s.accesses) return;
    let overlay = null;
    const canvas = tilesAccessCanvas(ref, (c, cell, cellH) => { overlay = { canvas: c, cell, cellH, ref }; });
    canvases[k] = overlay;
    const facts = [s.accesses + " access" + (s.accesses === 1 ? "" : "es"), s.untouched + " of " + s.elements + " elements never touched",
      s.readTwice + " read twice or more", s.maskedLanes + " masked-out lanes", s.outsideLanes + " enabled lanes outside the block"];
    if (s.writtenTwice) facts.push(s.writtenTwice + " written twice or more");
    refs.append(h("div", { class: "pl-tiles-operand", dataset: { ref: k } },
      h("div", { class: "pl-tiles-title" }, h("span", { class: "pl-role pl-role-" + (ref.role === "prefetch" ? "prefetch" : ref.role), text: ref.role }), " ", h("b", { text: ref.label }), " " + ref.type +
        (ref.pool[0] > 1 || ref.pool[1] > 1 ? " (drawn " + ref.pool.join("\u00d7") + " elements per pixel)" : "")),
      canvas, h("div", { class: "pl-tiles-info", text: facts.join(" \u00b7 ") })));
  });
  root.append(refs);
  const rows = data.accesses.map((a) => {
    const ref = data.refs[a.ref];
    return [a.kind, ref ? ref.label : "?", a.file + ":" + a.line, a.primitive, String(a.lanes), String(a.masked), String(a.outside),
      a.bbox.map(([x, y]) => x + ":" + y).join(", ")];
  });
  const list = table(["access", "buffer", "line", "primitive", "lanes", "masked", "outside", "elements"], rows);
  list.querySelectorAll("tbody tr").forEach((tr, i) => {
    const a = data.accesses[i];
    tr.dataset.access = i;
    tr.addEventListener("mouseenter", () => {
      const o = canvases[a.ref];
      if (!o || o.ref.shape.length > 2) return;
      const g = o.canvas.getContext("2d");
      const origin = o.ref.origin, pool = o.ref.pool;
      const [rb, cb] = a.bbox.length >= 2 ? [a.bbox[0], a.bbox[1]] : [[0, 1], a.bbox[0] || [0, 1]];
      const r0 = a.bbox.length >= 2 ? rb[0] - origin[0] : 0, r1 = a.bbox.length >= 2 ? rb[1] - origin[0] : 1;
      const c0 = cb[0] - origin[origin.length - 1], c1 = cb[1] - origin[origin.length - 1];
      o.saved = o.saved || g.getImageData(0, 0, o.canvas.width, o.canvas.height);
      g.putImageData(o.saved, 0, 0);
      g.strokeStyle = "#111111"; g.lineWidth = 2; g.setLineDash([]);
      g.strokeRect(c0 * o.cell / pool[1], r0 * o.cellH / pool[0], (c1 - c0) * o.cell / pool[1], (r1 - r0) * o.cellH / pool[0]);
    });
    tr.addEventListener("mouseleave", () => {
      const o = canvases[a.ref];
      if (o && o.saved) o.canvas.getContext("2d").putImageData(o.saved, 0, 0);
    });
  });
  const count = data.accessCount === undefined ? data.accesses.length : data.accessCount;
  const listed = count > data.accesses.length ? " (the first " + data.accesses.length + " listed)" : "";
  root.append(h("details", { class: "pl-tiles-list" }, h("summary", { text: count + " loads and stores, in order" + listed }), list));
  for (const n of data.notices) root.append(h("p", { class: "pl-notice", text: n }));
}

function tilesKernel(kernel, ctx, saved) {
  // Large grids come sampled: every stride[a]-th program along axis a. Positions and
  // indices below count the programs shown; `actual` gives a program's grid indices.
  const grid = kernel.shown || kernel.grid;
  const stride = kernel.stride || kernel.grid.map(() => 1);
  const sampled = stride.some((s) => s > 1);
  const total = kernel.shownPrograms || kernel.programs;
  const actual = (index) => index.map((v, a) => v * stride[a]);
  const view = {
    schedule: saved.schedule || kernel.schedule,
    chip: Object.assign({}, kernel.defaultChip, saved.chip || {}),
    position: Math.min(saved.position || 0, total - 1),
    hover: null, timer: null, speed: saved.speed || 1, accessesFor: null,
  };
  const root = h("div", { class: "pl-tiles", dataset: { kernel: kernel.index } });
  const operands = kernel.operands.filter((o) => o.mapped && (o.access === "pipelined" || o.access === "prefetch")).map((o) => new TilesOperand(o, kernel));
  const unmapped = kernel.operands.filter((o) => !(o.mapped && (o.access === "pipelined" || o.access === "prefetch")));
  const label = h("span", { class: "pl-tiles-program", dataset: { role: "program-label" } });
  const scrub = h("input", { type: "range", min: 0, max: Math.max(total - 1, 0), value: view.position, dataset: { role: "scrub" },
    oninput: (e) => { stop(); pin(Number(e.target.value)); } });
  const play = h("button", { class: "pl-tiles-play", dataset: { role: "play" }, text: "\u25b6 play", onclick: () => (view.timer ? stop() : start()) });
  const speed = h("select", { dataset: { role: "speed" }, title: "programs per step", onchange: (e) => { view.speed = Number(e.target.value); } },
    TILES_SPEEDS.map((s) => h("option", { value: s, text: s + "/step", selected: s === view.speed ? "selected" : null })));
  const order = h("p", { class: "pl-notice pl-tiles-order", dataset: { role: "order" } });
  const scheduleSelect = h("select", { dataset: { role: "schedule" }, onchange: (e) => { view.schedule = e.target.value; saved.schedule = view.schedule; refresh(); view.redrawFigures(); } },
    ["tpu", "gpu"].map((s) => h("option", { value: s, text: s === "tpu" ? "TPU order" : "GPU (parallel)", selected: s === view.schedule ? "selected" : null })));
  const cells = new Map();
  let programs;
  let gridCanvas = null;
  if (kernel.table) {
    const cols = grid.length ? grid[grid.length - 1] : 1;
    const rowCount = total / cols;
    const names = kernel.axisNames;
    const head = h("tr", {}, h("th", { text: grid.length > 1 ? names.slice(0, -1).join(", ") + " \\ " + names[names.length - 1] : names[0] || "" }),
      Array.from({ length: cols }, (_, j) => h("th", { text: grid.length ? String(j) : "()" })));
    const body = [];
    for (let r = 0; r < rowCount; r++) {
      const lead = tilesUnravel(r, grid.slice(0, -1));
      const tds = [];
      for (let j = 0; j < cols; j++) {
        const position = r * cols + j;
        const index = grid.length ? tilesUnravel(position, grid) : [];
        const td = h("td", { class: "pl-tiles-cell", title: "program " + tilesProgramText(index), dataset: { program: index.join(","), position },
          onmouseenter: () => { if (!view.timer) show(position); }, onclick: () => { stop(); pin(position); } });
        cells.set(position, td);
        tds.push(td);
      }
      body.push(h("tr", {}, h("th", { text: grid.length > 1 ? lead.join(", ") : "" }), tds));
    }
    programs = h("table", { class: "pl-tiles-grid", dataset: { role: "programs" }, onmouseleave: () => { if (!view.timer) show(null); } }, h("thead", {}, head), h("tbody", {}, body));
  } else {
    // Too many programs for a table: one pixel (or more) per program on a canvas.
    const cols = grid[grid.length - 1];
    const rowCount = total / cols;
    const w = Math.min(cols, 512), hgt = Math.min(rowCount, 256);
    gridCanvas = h("canvas", { class: "pl-tiles-canvas pl-tiles-gridmap", width: w, height: hgt, dataset: { role: "programs" },
      style: "width:" + Math.max(w, 256) + "px;height:" + Math.max(hgt, 64) + "px" });
    const at = (e) => {
      const rect = gridCanvas.getBoundingClientRect();
      const j = Math.min(cols - 1, Math.floor((e.clientX - rect.left) / rect.width * cols));
      const r = Math.min(rowCount - 1, Math.floor((e.clientY - rect.top) / rect.height * rowCount));
      return r * cols + j;
    };
    gridCanvas.addEventListener("mousemove", (e) => { if (!view.timer) show(at(e)); });
    gridCanvas.addEventListener("mouseleave", () => { if (!view.timer) show(null); });
    gridCanvas.addEventListener("click", (e) => { stop(); pin(at(e)); });
    programs = gridCanvas;
  }
  const accessBox = h("div", { class: "pl-tiles-accesses", dataset: { role: "accesses", status: "idle" } });
  const accessTitle = h("summary", { text: "Inside the block" });
  const accessPanel = h("details", { class: "pl-tiles-inside", open: "open" }, accessTitle, accessBox);
  accessPanel.addEventListener("toggle", () => { if (accessPanel.open) fetchAccesses(); });
  let accessTimer = null;

  function fetchAccesses() {
    if (!accessPanel.open || view.timer || !ctx.request) return;
    const index = actual(grid.length ? tilesUnravel(view.position, grid) : []);
    const key = index.join(",");
    accessTitle.textContent = "Inside the block: the loads and stores of program " + tilesProgramText(index);
    if (view.accessesFor === key) return;
    view.accessesFor = key;
    accessBox.dataset.status = "loading";
    clear(accessBox);
    accessBox.append(h("p", { class: "pl-loading", text: "Interpreting program " + tilesProgramText(index) + "\u2026" }));
    ctx.request({ kind: "accesses", kernel: kernel.index, program: index }).then((reply) => {
      if (view.accessesFor !== key) return;
      tilesAccesses(reply || { error: "no reply" }, accessBox);
    });
  }

  function show(position) {
    view.hover = position;
    refresh();
  }
  function pin(position) {
    view.position = Math.max(0, Math.min(total - 1, position));
    saved.position = view.position;
    refresh();
    clearTimeout(accessTimer);
    accessTimer = setTimeout(fetchAccesses, 250);
  }
  function start() {
    if (view.position >= total - 1) view.position = 0;
    play.textContent = "\u23f8 pause";
    view.timer = setInterval(() => {
      if (view.position >= total - 1) { stop(); return; }
      view.position = Math.min(total - 1, view.position + view.speed);
      saved.position = view.position;
      refresh();
    }, 150);
    refresh();
  }
  function stop() {
    if (!view.timer) return;
    clearInterval(view.timer);
    view.timer = null;
    play.textContent = "\u25b6 play";
    fetchAccesses();
  }

  function refresh() {
    const position = view.hover === null || view.timer ? view.position : view.hover;
    const index = grid.length ? tilesUnravel(position, grid) : [];
    const previousPosition = position > 0 && (view.timer || view.hover === null) ? position - 1 : null;
    const previous = previousPosition === null ? null : tilesUnravel(previousPosition, grid);
    let lit = 0;
    // Sampled programs are not consecutive: no "previous program" to compare with.
    for (const op of operands) if (op.draw(index, !sampled && (view.timer || view.hover === null) ? previous : null)) lit++;
    const program = actual(index);
    root.dataset.program = program.join(",");
    root.dataset.position = String(position);
    root.dataset.highlighted = String(lit);
    label.textContent = "program " + tilesProgramText(program) + " \u00b7 " + (position + 1) + " of " + total + (sampled ? " shown" : "");
    scrub.value = String(view.position);
    order.textContent = kernel.order[view.schedule];
    for (const [p, td] of cells) {
      td.classList.toggle("pl-tiles-current", p === position);
      td.classList.toggle("pl-tiles-pinned", p === view.position);
      td.classList.toggle("pl-tiles-done", view.schedule === "tpu" && p < position);
    }
    if (gridCanvas) {
      const g = gridCanvas.getContext("2d");
      const cols = grid[grid.length - 1], rowCount = total / cols;
      g.fillStyle = "#f6f8fa"; g.fillRect(0, 0, gridCanvas.width, gridCanvas.height);
      if (view.schedule === "tpu") {
        // Programs before this one in the TPU's order: done.
        const r = Math.floor(position / cols), j = position % cols;
        g.fillStyle = "#d0d7de";
        g.fillRect(0, 0, gridCanvas.width, r / rowCount * gridCanvas.height);
        g.fillRect(0, r / rowCount * gridCanvas.height, j / cols * gridCanvas.width, Math.max(1, gridCanvas.height / rowCount));
      }
      const x = (position % cols) / cols * gridCanvas.width, y = Math.floor(position / cols) / rowCount * gridCanvas.height;
      const cw = Math.max(2, gridCanvas.width / cols), ch = Math.max(2, gridCanvas.height / rowCount);
      g.fillStyle = "rgba(191, 135, 0, 0.35)";
      g.fillRect(x + cw / 2, 0, 1, gridCanvas.height);
      g.fillRect(0, y + ch / 2, gridCanvas.width, 1);
      g.fillStyle = "#bf8700";
      g.fillRect(x, y, cw, ch);
      gridCanvas.dataset.program = program.join(",");
    }
  }

  const facts = [
    "grid " + (kernel.grid.length ? kernel.grid.join(" \u00d7 ") : "()") + " = " + kernel.programs + " program" + (kernel.programs === 1 ? "" : "s"),
    kernel.semantics ? "axes " + kernel.semantics.map((sem, a) => (kernel.axisNames[a] || a) + ": " + sem).join(", ") : null,
  ].filter(Boolean);
  // Native append would print null and arrays as text: flatten and drop the empties.
  root.append(...[
    h("p", { class: "pl-facts", text: facts.join(" \u00b7 ") }),
    h("div", { class: "pl-toolbar pl-tiles-controls" }, play, speed, scrub, label, scheduleSelect),
    order,
    h("div", { class: "pl-tiles-programs" }, programs),
    h("div", { class: "pl-tiles-operands" }, operands.map((o) => o.el)),
    unmapped.length ? h("ul", { class: "pl-tiles-unmapped" }, unmapped.map((o) => h("li", { class: "pl-notice",
      text: o.label + " (" + o.role + "): " + (o.access === "scratch" ? "scratch, in the kernel's memory only" : o.access === "manual" ? "left in " + o.memory.toUpperCase() + ": the body copies what it needs" : o.reason || "no blocks") }))) : null,
    kernel.notices.map((n) => h("p", { class: "pl-notice", text: n })),
    h("details", { class: "pl-tiles-merit", open: "open" }, h("summary", { text: "Figures of merit" }), tilesFigures(kernel, view)),
    accessPanel,
  ].flat().filter(Boolean));
  refresh();
  setTimeout(fetchAccesses, 0);
  root.stop = stop;
  return root;
}

TABS.tiles = {
  render(root, data, ctx) {
    const state = ctx.state.tiles || (ctx.state.tiles = { kernel: 0, kernels: {} });
    if (state.current && state.current.stop) state.current.stop();
    if (!data.kernels.length) return root.append(h("p", { text: "No Pallas kernels found." }));
    const holder = h("div", {});
    const draw = () => {
      if (state.current && state.current.stop) state.current.stop();
      clear(holder);
      const kernel = data.kernels.find((k) => k.index === state.kernel) || data.kernels[0];
      if (kernel.error) return holder.append(h("p", { class: "pl-problem", text: kernel.name + ": " + kernel.error }));
      const saved = state.kernels[kernel.index] || (state.kernels[kernel.index] = {});
      state.current = tilesKernel(kernel, ctx, saved);
      holder.append(state.current);
    };
    if (data.kernels.length > 1) {
      root.append(h("p", { class: "pl-toolbar" }, "kernel ",
        h("select", { dataset: { role: "kernel" }, onchange: (e) => { state.kernel = Number(e.target.value); draw(); } },
          data.kernels.map((k) => h("option", { value: k.index, text: k.index + ": " + k.name, selected: k.index === state.kernel ? "selected" : null })))));
    }
    root.append(holder);
    draw();
  },
};
