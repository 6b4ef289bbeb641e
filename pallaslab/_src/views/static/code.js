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

  highlight(lines) {
    for (const row of this.body.querySelectorAll(".pl-active")) row.classList.remove("pl-active");
    let firstRow = null;
    for (const line of lines || []) {
      const row = this.rows.get(line);
      if (row) {
        row.classList.add("pl-active");
        firstRow = firstRow || row;
      }
    }
    return firstRow;
  }

  reveal(row) {
    if (!row) return;
    const top = row.offsetTop - this.body.offsetTop;
    if (top < this.body.scrollTop || top > this.body.scrollTop + this.body.clientHeight - 20) {
      this.body.scrollTop = Math.max(0, top - this.body.clientHeight / 3);
    }
  }
}

// Two-way linking between source windows and a derived text (jaxpr, IR).
// `map` holds [textLine, fileIndex, sourceLine] triples.
function linkViews(textView, sourceViews, map) {
  const textToSource = new Map();
  const sourceToText = new Map();
  const colours = new Map();
  for (const [line, file, sourceLine] of map) {
    const key = file + ":" + sourceLine;
    if (!colours.has(key)) colours.set(key, colours.size);
    textToSource.set(line, [file, sourceLine]);
    if (!sourceToText.has(key)) sourceToText.set(key, []);
    sourceToText.get(key).push(line);
  }
  textView.colour([...textToSource].map(([line, [f, s]]) => [line, colours.get(f + ":" + s)]));
  sourceViews.forEach((view, file) => {
    if (!view) return;
    view.colour([...colours].filter(([key]) => key.startsWith(file + ":"))
      .map(([key, c]) => [Number(key.split(":")[1]), c]));
  });
  const showSource = (file, sourceLine, revealText) => {
    sourceViews.forEach((view, f) => view && view.highlight(f === file ? [sourceLine] : []));
    const row = textView.highlight(sourceToText.get(file + ":" + sourceLine) || []);
    if (revealText) textView.reveal(row);
    if (!revealText && sourceViews[file]) sourceViews[file].reveal(sourceViews[file].rows.get(sourceLine));
  };
  const clearAll = () => {
    textView.highlight([]);
    sourceViews.forEach((view) => view && view.highlight([]));
  };
  return {
    onTextHover(line) {
      const target = line === null ? null : textToSource.get(line);
      if (!target) return clearAll();
      showSource(target[0], target[1], false);
    },
    onSourceHover(file, line) {
      if (line === null) return clearAll();
      showSource(file, line, true);
    },
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

// A whole long text from the kernel (views/texts.py): a header message, then chunks.
let textRequests = 0;
function requestText(model, tab, key, timeoutMs = 120000) {
  const request = ++textRequests;
  return new Promise((resolve, reject) => {
    let header = null;
    const pieces = [];
    let received = 0;
    const done = (error, value) => {
      clearTimeout(timer);
      model.off("msg:custom", onMessage);
      if (error) reject(error); else resolve(value);
    };
    const onMessage = (msg) => {
      if (!msg || msg.request !== request) return;
      if (msg.type === "pallaslab:text-error") return done(new Error(msg.message));
      if (msg.type === "pallaslab:text") header = msg;
      if (msg.type === "pallaslab:text-chunk") {
        pieces[msg.index] = msg.text;
        received += 1;
      }
      if (header && received === header.chunks) {
        done(null, { title: header.title, language: header.language, text: pieces.join(""),
          sourceMap: header.sourceMap, sources: header.sources });
      }
    };
    const timer = setTimeout(() => done(new Error("the kernel did not answer (is it running?)")), timeoutMs);
    model.on("msg:custom", onMessage);
    model.send({ type: "pallaslab:get-text", request, tab, key });
  });
}
