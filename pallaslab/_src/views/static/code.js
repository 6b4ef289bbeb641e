// A numbered, highlighted code view whose lines can be linked to other views.
const LINK_COLOURS = 8;

class CodeView {
  constructor({ lines, first = 1, language = "", marks = [], title = "", onHover, onClick }) {
    this.first = first;
    this.rows = new Map();
    const markByLine = new Map(marks.map((m) => [m.line, m]));
    const body = h("div", { class: "pl-code-body" });
    lines.forEach((text, offset) => {
      const number = first + offset;
      const mark = markByLine.get(number);
      const row = h("div", { class: "pl-line", dataset: { line: number } },
        h("span", { class: "pl-ln", text: number }),
        h("span", { class: "pl-src" }, highlightedLine(text, language)),
        mark ? h("span", { class: "pl-mark pl-mark-" + mark.kind, text: "\u2190 " + mark.text }) : null);
      if (onHover) {
        row.addEventListener("mouseenter", () => onHover(number));
        row.addEventListener("mouseleave", () => onHover(null));
      }
      if (onClick) row.addEventListener("click", () => onClick(number));
      this.rows.set(number, row);
      body.append(row);
    });
    this.el = h("div", { class: "pl-code" }, title ? h("div", { class: "pl-code-title", text: title }) : null, body);
    this.body = body;
  }

  // Tints lines with their link colour (Compiler-Explorer style).
  colour(lineToColour) {
    for (const [line, colour] of lineToColour) {
      const row = this.rows.get(line);
      if (row) row.dataset.colour = String(colour % LINK_COLOURS);
    }
  }

  // Marks `lines` active; returns the first of them shown here (or null).
  highlight(lines) {
    for (const row of this.body.querySelectorAll(".pl-active")) row.classList.remove("pl-active");
    let firstLine = null;
    for (const line of lines || []) {
      const row = this.rows.get(line);
      if (row) {
        row.classList.add("pl-active");
        if (firstLine === null || line < firstLine) firstLine = line;
      }
    }
    return firstLine;
  }

  reveal(row) {
    if (!row) return;
    const top = row.offsetTop - this.body.offsetTop;
    if (top < this.body.scrollTop || top > this.body.scrollTop + this.body.clientHeight - 60) {
      this.body.scrollTop = Math.max(0, top - this.body.clientHeight / 3);
    }
  }

  revealLine(line) {
    this.reveal(line === null || line === undefined ? null : this.rows.get(line));
  }
}

// A code view for long texts (tens of thousands of lines): only the rows in sight
// are in the DOM; lines can be appended as they arrive.
class VirtualCodeView {
  constructor({ language = "", title = "", onHover, onClick }) {
    this.language = language;
    this.lines = [];
    this.colours = new Map();
    this.active = new Set();
    this.rowHeight = 0;
    this.frame = 0;
    this.window = h("div", { class: "pl-virtual-window" });
    this.spacer = h("div", { class: "pl-virtual-spacer" }, this.window);
    this.body = h("div", { class: "pl-code-body pl-virtual" }, this.spacer);
    this.titleEl = h("div", { class: "pl-code-title", text: title });
    this.el = h("div", { class: "pl-code" }, title ? this.titleEl : null, this.body);
    this.body.addEventListener("scroll", () => this.schedule());
    const lineOf = (event) => {
      const row = event.target && event.target.closest ? event.target.closest(".pl-line") : null;
      return row ? Number(row.dataset.line) : null;
    };
    if (onHover) {
      this.window.addEventListener("mouseover", (event) => {
        const line = lineOf(event);
        if (line !== null && line !== this.hovered) {
          this.hovered = line;
          onHover(line);
        }
      });
      this.window.addEventListener("mouseleave", () => {
        this.hovered = null;
        onHover(null);
      });
    }
    if (onClick) this.window.addEventListener("click", (event) => {
      const line = lineOf(event);
      if (line !== null) onClick(line);
    });
  }

  append(lines) {
    for (const line of lines) this.lines.push(line);
    this.spacer.style.height = (this.lines.length * this.measure()) + "px";
    this.schedule();
  }

  // The height of one row; measured once the view is laid out (17px until then).
  measure() {
    if (this.rowHeight < 8) {
      const probe = h("div", { class: "pl-line" }, h("span", { class: "pl-ln", text: "1" }), "x");
      this.window.append(probe);
      const height = probe.getBoundingClientRect().height;
      probe.remove();
      if (height >= 8) this.rowHeight = height;
    }
    return this.rowHeight >= 8 ? this.rowHeight : 17;
  }

  schedule() {
    if (this.frame) return;
    const run = () => { this.frame = 0; this.render(); };
    this.frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : setTimeout(run, 0);
  }

  render() {
    const height = this.measure();
    const view = this.body.clientHeight || 440;
    const overscan = 20;
    const first = Math.max(0, Math.floor(this.body.scrollTop / height) - overscan);
    const last = Math.min(this.lines.length, Math.ceil((this.body.scrollTop + view) / height) + overscan);
    clear(this.window);
    this.window.style.transform = "translateY(" + (first * height) + "px)";
    for (let index = first; index < last; index++) {
      const number = index + 1;
      const colour = this.colours.get(number);
      this.window.append(h("div", {
        class: "pl-line" + (this.active.has(number) ? " pl-active" : ""),
        dataset: colour === undefined ? { line: number } : { line: number, colour: String(colour) },
      }, h("span", { class: "pl-ln", text: number }),
      h("span", { class: "pl-src" }, highlightedLine(this.lines[index], this.language))));
    }
    // Rows laid out at another height than measured (fonts loaded late): re-measure.
    const row = this.window.firstChild;
    const actual = row ? row.getBoundingClientRect().height : 0;
    if (actual >= 8 && Math.abs(actual - height) > 0.5) {
      this.rowHeight = actual;
      this.spacer.style.height = (this.lines.length * actual) + "px";
      this.schedule();
    }
  }

  colour(lineToColour) {
    for (const [line, colour] of lineToColour) this.colours.set(line, colour % LINK_COLOURS);
    this.schedule();
  }

  // Marks `lines` active; returns the one to bring into view: the first at or below
  // the top of the view, else the first of all.
  highlight(lines) {
    this.active = new Set(lines || []);
    this.schedule();
    const top = Math.floor(this.body.scrollTop / this.measure()) + 1;
    let first = null;
    let below = null;
    for (const line of this.active) {
      if (first === null || line < first) first = line;
      if (line >= top && (below === null || line < below)) below = line;
    }
    return below === null ? first : below;
  }

  revealLine(line) {
    if (line === null || line === undefined) return;
    const height = this.measure();
    const top = (line - 1) * height;
    if (top < this.body.scrollTop || top > this.body.scrollTop + this.body.clientHeight - height) {
      this.body.scrollTop = Math.max(0, top - this.body.clientHeight / 3);
    }
  }
}

// Two-way linking between source windows and a derived text (jaxpr, IR).
// `map` holds [textLine, fileIndex, sourceLine] triples; a text line may have several
// (a TPU bundle holds instructions of several source lines). More entries can be
// added as a text arrives (`addMap`). Clicking a line pins its links until the next
// click.
function linkViews(textView, sourceViews, map, options = {}) {
  const textToSource = new Map();
  const sourceToText = new Map();
  const colours = new Map();
  let pinned = false;
  const addMap = (entries) => {
    const textColours = [];
    const sourceColours = new Map();
    for (const [line, file, sourceLine] of entries) {
      const key = file + ":" + sourceLine;
      if (!colours.has(key)) {
        colours.set(key, colours.size);
        if (!sourceColours.has(file)) sourceColours.set(file, []);
        sourceColours.get(file).push([sourceLine, colours.get(key)]);
      }
      if (!textToSource.has(line)) {
        textToSource.set(line, []);
        textColours.push([line, colours.get(key)]);
      }
      textToSource.get(line).push([file, sourceLine]);
      if (!sourceToText.has(key)) sourceToText.set(key, []);
      sourceToText.get(key).push(line);
    }
    textView.colour(textColours);
    sourceColours.forEach((pairs, file) => {
      if (!sourceViews[file] && options.sourceView) options.sourceView(file);
      if (sourceViews[file]) sourceViews[file].colour(pairs);
    });
  };
  addMap(map);
  // Highlights the source lines `targets` ([file, line] pairs) and every text line
  // that comes from them, scrolling the text or the sources into view.
  const show = (targets, revealText, revealSource) => {
    const files = new Map();
    const lines = new Set();
    for (const [file, line] of targets) {
      if (!files.has(file)) files.set(file, []);
      files.get(file).push(line);
      for (const t of sourceToText.get(file + ":" + line) || []) lines.add(t);
    }
    const first = textView.highlight([...lines]);
    if (revealText) textView.revealLine(first);
    sourceViews.forEach((view, f) => view && view.highlight(files.get(f) || []));
    if (revealSource) {
      for (const [file, fileLines] of files) {
        if (sourceViews[file]) sourceViews[file].revealLine(Math.min(...fileLines));
      }
    }
  };
  const clearAll = () => {
    textView.highlight([]);
    sourceViews.forEach((view) => view && view.highlight([]));
  };
  const onTextHover = (line, force) => {
    if (pinned && !force) return;
    const targets = line === null ? null : textToSource.get(line);
    if (!targets) return clearAll();
    show(targets, false, true);
  };
  const onSourceHover = (file, line, force) => {
    if (pinned && !force) return;
    if (line === null) return clearAll();
    show([[file, line]], true, false);
  };
  return {
    onTextHover,
    onSourceHover,
    onTextClick(line) {
      pinned = !pinned;
      if (pinned) onTextHover(line, true);
    },
    onSourceClick(file, line) {
      pinned = !pinned;
      if (pinned) onSourceHover(file, line, true);
    },
    addMap,
    textToSource,
    sourceToText,
  };
}

// "Open in new tab": a button that asks JupyterLab's pallaslab extension to open a
// text (jaxpr, IR) as a read-only tab beside the notebook. The extension sets the
// flag; elsewhere (Notebook 7, VS Code, Colab) there is no button. `detail()` returns
// (or promises) {title, language, text, sourceMap: [[textLine, fileIndex, sourceLine]],
// sources: [{label, first, lines}]}.
function openTextButton(detail) {
  if (globalThis.__pallaslabLab !== true) return null;
  const button = h("button", {
    class: "pl-open-text", type: "button", text: "Open in new tab",
    title: "Open as a read-only tab beside the notebook, still linked to its source lines",
  });
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Opening\u2026";
    try {
      const request = await detail();
      button.dispatchEvent(new CustomEvent("pallaslab:open-text", {
        bubbles: true, composed: true, detail: request }));
      button.textContent = "Open in new tab";
    } catch (err) {
      button.textContent = "Could not open: " + (err && err.message ? err.message : err);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// The source windows as an open-text request carries them.
function openTextSources(files) {
  return files.map((f) => ({ label: f.label, first: f.first, lines: f.lines }));
}

// A whole long text of a tab (views/texts.py), fetched with the tab's `ctx.request`:
// its header first, then its pieces.
async function requestText(request, key) {
  const header = await request({ textKey: key, chunk: -1 });
  if (header.error) throw new Error(header.error);
  const pieces = [];
  for (let index = 0; index < header.chunks; index++) {
    const piece = await request({ textKey: key, chunk: index });
    if (piece.error) throw new Error(piece.error);
    pieces.push(piece.text);
  }
  return { title: header.title, language: header.language, text: pieces.join(""),
    sourceMap: header.sourceMap, sources: header.sources };
}
