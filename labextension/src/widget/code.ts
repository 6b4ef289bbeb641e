/**
 * Numbered, highlighted code views whose lines link to other views (a derived text
 * and the source it came from), and "Open in new tab" for JupyterLab.
 */

import type {
  IMark,
  IOpenTextRequest,
  IOpenTextSource,
  ISourceWindow,
  ITextHeaderReply,
  SourceMapEntry
} from '../contracts';
import { LINK_COLOURS, OPEN_TEXT_EVENT } from '../linemap';
import { Requester, isError } from './context';
import { clear, h } from './dom';
import { highlightedLine } from './highlight';

/** What the linking needs of a view of lines. */
export interface ILineView {
  readonly el: HTMLElement;
  /** Tints lines with their link colour (Compiler-Explorer style). */
  colour(lineToColour: [number, number][]): void;
  /** Marks `lines` active; returns the one to bring into view (or null). */
  highlight(lines: number[]): number | null;
  revealLine(line: number | null): void;
}

/** Options of a code view. */
export interface ICodeViewOptions {
  lines?: string[];
  first?: number;
  language?: string;
  marks?: IMark[];
  title?: string;
  /** Per line, a short text in a fixed-width column before it (the cost gutter). */
  gutter?: Map<number, { text: string; title: string }>;
  onHover?: (line: number | null) => void;
  onClick?: (line: number) => void;
}

/**
 * Lets a code body's height be dragged past its default cap: the first press
 * (on the resize corner) fixes the height it has and lifts the cap.
 */
export function resizable(body: HTMLElement): void {
  body.addEventListener('mousedown', () => {
    if (!body.style.height) {
      body.style.height = `${body.getBoundingClientRect().height}px`;
      body.style.maxHeight = 'none';
    }
  });
}

/** A whole (short) text: every line in the DOM. */
export class CodeView implements ILineView {
  constructor({
    lines = [],
    first = 1,
    language = '',
    marks = [],
    title = '',
    gutter,
    onHover,
    onClick
  }: ICodeViewOptions) {
    const markByLine = new Map(marks.map(m => [m.line, m]));
    // The gutter is as wide as its longest text, the same on every line.
    const width = gutter
      ? Math.max(0, ...Array.from(gutter.values(), g => g.text.length))
      : 0;
    this.body = h('div', { class: 'pl-code-body' });
    resizable(this.body);
    lines.forEach((text, offset) => {
      const number = first + offset;
      const mark = markByLine.get(number);
      const row = h(
        'div',
        { class: 'pl-line', dataset: { line: number } },
        h('span', { class: 'pl-ln', text: number }),
        gutter
          ? h('span', {
              class: 'pl-gutter',
              style: `width: ${width + 1}ch`,
              text: gutter.get(number)?.text ?? '',
              title: gutter.get(number)?.title
            })
          : null,
        h('span', { class: 'pl-src' }, highlightedLine(text, language)),
        mark
          ? h('span', {
              class: `pl-mark pl-mark-${mark.kind}`,
              text: `\u2190 ${mark.text}`
            })
          : null
      );
      if (onHover) {
        row.addEventListener('mouseenter', () => onHover(number));
        row.addEventListener('mouseleave', () => onHover(null));
      }
      if (onClick) {
        row.addEventListener('click', () => onClick(number));
      }
      this.rows.set(number, row);
      this.body.append(row);
    });
    this.el = h(
      'div',
      { class: 'pl-code' },
      title ? h('div', { class: 'pl-code-title', text: title }) : null,
      this.body
    );
  }

  readonly el: HTMLElement;
  readonly body: HTMLElement;
  private rows = new Map<number, HTMLElement>();

  colour(lineToColour: [number, number][]): void {
    for (const [line, colour] of lineToColour) {
      const row = this.rows.get(line);
      if (row) {
        row.dataset.colour = String(colour % LINK_COLOURS);
      }
    }
  }

  highlight(lines: number[]): number | null {
    for (const row of Array.from(this.body.querySelectorAll('.pl-active'))) {
      row.classList.remove('pl-active');
    }
    let firstLine: number | null = null;
    for (const line of lines) {
      const row = this.rows.get(line);
      if (row) {
        row.classList.add('pl-active');
        if (firstLine === null || line < firstLine) {
          firstLine = line;
        }
      }
    }
    return firstLine;
  }

  revealLine(line: number | null): void {
    const row = line === null ? undefined : this.rows.get(line);
    if (!row) {
      return;
    }
    const top = row.offsetTop - this.body.offsetTop;
    const body = this.body;
    if (top < body.scrollTop || top > body.scrollTop + body.clientHeight - 60) {
      body.scrollTop = Math.max(0, top - body.clientHeight / 3);
    }
  }
}

/**
 * A view for long texts (tens of thousands of lines): only the rows in sight are
 * in the DOM; lines can be appended as they arrive.
 */
export class VirtualCodeView implements ILineView {
  constructor({
    language = '',
    title = '',
    onHover,
    onClick
  }: ICodeViewOptions) {
    this.language = language;
    this.window = h('div', { class: 'pl-virtual-window' });
    this.spacer = h('div', { class: 'pl-virtual-spacer' }, this.window);
    this.body = h('div', { class: 'pl-code-body pl-virtual' }, this.spacer);
    this.el = h(
      'div',
      { class: 'pl-code' },
      title ? h('div', { class: 'pl-code-title', text: title }) : null,
      this.body
    );
    this.body.addEventListener('scroll', () => this.schedule());
    resizable(this.body);
    // The body's height can be dragged: draw the rows that come into sight.
    if (typeof ResizeObserver === 'function') {
      new ResizeObserver(() => this.schedule()).observe(this.body);
    }
    const lineOf = (event: Event): number | null => {
      const target = event.target as Element | null;
      const row = target && target.closest ? target.closest('.pl-line') : null;
      return row ? Number((row as HTMLElement).dataset.line) : null;
    };
    if (onHover) {
      this.window.addEventListener('mouseover', event => {
        const line = lineOf(event);
        if (line !== null && line !== this.hovered) {
          this.hovered = line;
          onHover(line);
        }
      });
      this.window.addEventListener('mouseleave', () => {
        this.hovered = null;
        onHover(null);
      });
    }
    if (onClick) {
      this.window.addEventListener('click', event => {
        const line = lineOf(event);
        if (line !== null) {
          onClick(line);
        }
      });
    }
  }

  readonly el: HTMLElement;
  readonly body: HTMLElement;
  readonly lines: string[] = [];
  private language: string;
  private window: HTMLElement;
  private spacer: HTMLElement;
  private colours = new Map<number, number>();
  private active = new Set<number>();
  private rowHeight = 0;
  private frame = 0;
  private hovered: number | null = null;

  append(lines: string[]): void {
    for (const line of lines) {
      this.lines.push(line);
    }
    this.spacer.style.height = `${this.lines.length * this.measure()}px`;
    this.schedule();
  }

  /** The height of one row, measured once laid out (17px until then). */
  private measure(): number {
    if (this.rowHeight < 8) {
      const probe = h(
        'div',
        { class: 'pl-line' },
        h('span', { class: 'pl-ln', text: '1' }),
        'x'
      );
      this.window.append(probe);
      const height = probe.getBoundingClientRect().height;
      probe.remove();
      if (height >= 8) {
        this.rowHeight = height;
      }
    }
    return this.rowHeight >= 8 ? this.rowHeight : 17;
  }

  private schedule(): void {
    if (this.frame) {
      return;
    }
    const run = () => {
      this.frame = 0;
      this.render();
    };
    this.frame =
      typeof requestAnimationFrame === 'function'
        ? requestAnimationFrame(run)
        : (setTimeout(run, 0) as unknown as number);
  }

  /** Draws the rows in sight (and a margin around them). */
  render(): void {
    const height = this.measure();
    const view = this.body.clientHeight || 440;
    const overscan = 20;
    const first = Math.max(
      0,
      Math.floor(this.body.scrollTop / height) - overscan
    );
    const last = Math.min(
      this.lines.length,
      Math.ceil((this.body.scrollTop + view) / height) + overscan
    );
    clear(this.window);
    this.window.style.transform = `translateY(${first * height}px)`;
    for (let index = first; index < last; index++) {
      const number = index + 1;
      const colour = this.colours.get(number);
      this.window.append(
        h(
          'div',
          {
            class: 'pl-line' + (this.active.has(number) ? ' pl-active' : ''),
            dataset:
              colour === undefined
                ? { line: number }
                : { line: number, colour: String(colour) }
          },
          h('span', { class: 'pl-ln', text: number }),
          h(
            'span',
            { class: 'pl-src' },
            highlightedLine(this.lines[index], this.language)
          )
        )
      );
    }
    // Rows laid out at another height than measured (fonts loaded late): re-measure.
    const row = this.window.firstChild as HTMLElement | null;
    const actual = row ? row.getBoundingClientRect().height : 0;
    if (actual >= 8 && Math.abs(actual - height) > 0.5) {
      this.rowHeight = actual;
      this.spacer.style.height = `${this.lines.length * actual}px`;
      this.schedule();
    }
  }

  colour(lineToColour: [number, number][]): void {
    for (const [line, colour] of lineToColour) {
      this.colours.set(line, colour % LINK_COLOURS);
    }
    this.schedule();
  }

  /** Marks lines active; returns the first at or below the top of the view, else the first. */
  highlight(lines: number[]): number | null {
    this.active = new Set(lines);
    this.schedule();
    const top = Math.floor(this.body.scrollTop / this.measure()) + 1;
    let first: number | null = null;
    let below: number | null = null;
    for (const line of this.active) {
      if (first === null || line < first) {
        first = line;
      }
      if (line >= top && (below === null || line < below)) {
        below = line;
      }
    }
    return below === null ? first : below;
  }

  revealLine(line: number | null): void {
    if (line === null) {
      return;
    }
    const height = this.measure();
    const top = (line - 1) * height;
    const body = this.body;
    if (
      top < body.scrollTop ||
      top > body.scrollTop + body.clientHeight - height
    ) {
      body.scrollTop = Math.max(0, top - body.clientHeight / 3);
    }
  }
}

/** Two-way links between a derived text and its source windows. */
export interface ILinker {
  onTextHover(line: number | null, force?: boolean): void;
  onSourceHover(file: number, line: number | null, force?: boolean): void;
  onTextClick(line: number): void;
  onSourceClick(file: number, line: number): void;
  /** Adds map entries (as a text arrives in pieces). */
  addMap(entries: SourceMapEntry[]): void;
  readonly textToSource: Map<number, [number, number][]>;
  readonly sourceToText: Map<string, number[]>;
}

/**
 * Links a text view to source views by `map` ([text line, file index, source
 * line]); a text line may have several entries (a TPU bundle). Clicking a line
 * pins its links until the next click. `sourceView(file)` is called for a source
 * window not drawn yet that the map points into.
 */
export function linkViews(
  textView: ILineView,
  sourceViews: (ILineView | null | undefined)[],
  map: SourceMapEntry[],
  options: { sourceView?: (file: number) => void } = {}
): ILinker {
  const textToSource = new Map<number, [number, number][]>();
  const sourceToText = new Map<string, number[]>();
  const colours = new Map<string, number>();
  let pinned = false;
  const addMap = (entries: SourceMapEntry[]) => {
    const textColours: [number, number][] = [];
    const sourceColours = new Map<number, [number, number][]>();
    for (const [line, file, sourceLine] of entries) {
      const key = `${file}:${sourceLine}`;
      if (!colours.has(key)) {
        colours.set(key, colours.size);
        if (!sourceColours.has(file)) {
          sourceColours.set(file, []);
        }
        sourceColours.get(file)!.push([sourceLine, colours.get(key)!]);
      }
      if (!textToSource.has(line)) {
        textToSource.set(line, []);
        textColours.push([line, colours.get(key)!]);
      }
      textToSource.get(line)!.push([file, sourceLine]);
      if (!sourceToText.has(key)) {
        sourceToText.set(key, []);
      }
      sourceToText.get(key)!.push(line);
    }
    textView.colour(textColours);
    sourceColours.forEach((pairs, file) => {
      if (!sourceViews[file] && options.sourceView) {
        options.sourceView(file);
      }
      sourceViews[file]?.colour(pairs);
    });
  };
  addMap(map);
  // Highlights source lines ([file, line] pairs) and every text line from them.
  const show = (
    targets: [number, number][],
    revealText: boolean,
    revealSource: boolean
  ) => {
    const files = new Map<number, number[]>();
    const lines = new Set<number>();
    for (const [file, line] of targets) {
      if (!files.has(file)) {
        files.set(file, []);
      }
      files.get(file)!.push(line);
      for (const t of sourceToText.get(`${file}:${line}`) ?? []) {
        lines.add(t);
      }
    }
    const first = textView.highlight([...lines]);
    if (revealText) {
      textView.revealLine(first);
    }
    sourceViews.forEach((view, f) => view?.highlight(files.get(f) ?? []));
    if (revealSource) {
      for (const [file, fileLines] of files) {
        sourceViews[file]?.revealLine(Math.min(...fileLines));
      }
    }
  };
  const clearAll = () => {
    textView.highlight([]);
    sourceViews.forEach(view => view?.highlight([]));
  };
  const onTextHover = (line: number | null, force = false) => {
    if (pinned && !force) {
      return;
    }
    const targets = line === null ? undefined : textToSource.get(line);
    if (!targets) {
      clearAll();
      return;
    }
    show(targets, false, true);
  };
  const onSourceHover = (file: number, line: number | null, force = false) => {
    if (pinned && !force) {
      return;
    }
    if (line === null) {
      clearAll();
      return;
    }
    show([[file, line]], true, false);
  };
  return {
    onTextHover,
    onSourceHover,
    onTextClick(line: number) {
      pinned = !pinned;
      if (pinned) {
        onTextHover(line, true);
      }
    },
    onSourceClick(file: number, line: number) {
      pinned = !pinned;
      if (pinned) {
        onSourceHover(file, line, true);
      }
    },
    addMap,
    textToSource,
    sourceToText
  };
}

/** Whether JupyterLab's pallaslab extension listens for texts to open. */
export function inLab(): boolean {
  return (globalThis as { __pallaslabLab?: unknown }).__pallaslabLab === true;
}

/** Dispatches the open-text event from a node (bubbling out of the widget). */
export function dispatchOpenText(
  from: Element,
  detail: IOpenTextRequest
): void {
  from.dispatchEvent(
    new CustomEvent<IOpenTextRequest>(OPEN_TEXT_EVENT, {
      bubbles: true,
      composed: true,
      detail
    })
  );
}

/**
 * "Open in new tab": a button that asks JupyterLab's pallaslab extension to open a
 * text beside the notebook. Elsewhere (Notebook 7, VS Code, Colab) there is none.
 */
export function openTextButton(
  detail: () => IOpenTextRequest | Promise<IOpenTextRequest>
): HTMLButtonElement | null {
  if (!inLab()) {
    return null;
  }
  const button = h('button', {
    class: 'pl-open-text',
    type: 'button',
    text: 'Open in new tab',
    title:
      'Open as a read-only tab beside the notebook, still linked to its source lines'
  });
  button.addEventListener('click', async () => {
    button.disabled = true;
    button.textContent = 'Opening\u2026';
    try {
      dispatchOpenText(button, await detail());
      button.textContent = 'Open in new tab';
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      button.textContent = `Could not open: ${message}`;
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** The source windows as an open-text request carries them. */
export function openTextSources(files: ISourceWindow[]): IOpenTextSource[] {
  return files.map(f => ({ label: f.label, first: f.first, lines: f.lines }));
}

/** A whole long text of a tab (views/texts.py): its header, then its pieces. */
export async function requestText(
  request: Requester,
  key: string
): Promise<IOpenTextRequest> {
  const header = await request({ textKey: key, chunk: -1 });
  if (isError(header)) {
    throw new Error(header.error);
  }
  const head = header as ITextHeaderReply;
  const pieces: string[] = [];
  for (let index = 0; index < head.chunks; index++) {
    const piece = await request({ textKey: key, chunk: index });
    if (isError(piece)) {
      throw new Error(piece.error);
    }
    pieces.push((piece as { text: string }).text);
  }
  return {
    title: head.title,
    language: head.language,
    text: pieces.join(''),
    sourceMap: head.sourceMap,
    sources: head.sources
  };
}

/**
 * Controls for a pair of panes (source | derived text): "full width" puts the
 * text above its source at the pane's whole width; "wrap lines" (for views that
 * hold every line) wraps long lines instead of scrolling sideways. Choices stay
 * in `state` across redraws. Code views' heights are resizable by their corner.
 */
export function layoutControls(
  panes: HTMLElement,
  state: { [key: string]: any },
  options: { wrap: boolean }
): HTMLElement {
  const apply = () => {
    panes.classList.toggle('pl-stacked', state.layoutStacked === true);
    panes.classList.toggle('pl-wrap', options.wrap && state.wrapLines === true);
  };
  const checkbox = (key: string, label: string, title: string) => {
    const box = h('input', { type: 'checkbox', class: `pl-${key}` });
    box.checked = state[key] === true;
    box.addEventListener('change', () => {
      state[key] = box.checked;
      apply();
    });
    return h('label', { class: 'pl-layout-control', title }, box, label);
  };
  apply();
  return h(
    'span',
    { class: 'pl-layout' },
    checkbox(
      'layoutStacked',
      ' full width',
      'Show the text at full width, above its source'
    ),
    options.wrap
      ? checkbox('wrapLines', ' wrap lines', 'Wrap long lines')
      : null
  );
}
