/**
 * A derived text (jaxpr, MLIR, PTX ...) in its own main-area tab: read-only,
 * highlighted, every line tinted by the source line it comes from, and linked
 * both ways to the notebook cell that source line is in.
 */

import { defaultKeymap } from '@codemirror/commands';
import {
  highlightSelectionMatches,
  search,
  searchKeymap
} from '@codemirror/search';
import { EditorState, RangeSetBuilder, StateField } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  highlightActiveLine,
  keymap,
  lineNumbers
} from '@codemirror/view';
import { jupyterTheme } from '@jupyterlab/codemirror';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookLink } from './celllink';
import { languageSupport } from './languages';
import { lineHighlight } from './linehighlight';
import { IOpenTextRequest, ISourceLine, LineLinks } from './linemap';

/** Class of text lines linked to the line under the mouse or cursor. */
export const ACTIVE_LINE_CLASS = 'pl-lab-active';

const { setLines: setActiveLines, field: activeLinesField } =
  lineHighlight(ACTIVE_LINE_CLASS);

function linkColours(state: EditorState, links: LineLinks): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  const marks = new Map<number, Decoration>();
  for (const [line, colour] of links.colouredTextLines()) {
    if (line > state.doc.lines) {
      break;
    }
    let mark = marks.get(colour);
    if (!mark) {
      mark = Decoration.line({
        attributes: { 'data-pl-colour': String(colour) }
      });
      marks.set(colour, mark);
    }
    const from = state.doc.line(line).from;
    builder.add(from, from, mark);
  }
  return builder.finish();
}

function span(className: string, text: string): HTMLSpanElement {
  const node = document.createElement('span');
  node.className = className;
  node.textContent = text;
  return node;
}

/** The options of a text view. */
export interface ITextViewOptions {
  request: IOpenTextRequest;
  /** The notebook the request came from, when there is one. */
  link: NotebookLink | null;
}

/** The content of a "pallaslab text" main-area tab. */
export class TextView extends Widget {
  constructor(options: ITextViewOptions) {
    super();
    const { request, link } = options;
    this.request = request;
    this.links = new LineLinks(request.sourceMap, request.sources);
    this._link = link;
    this.addClass('pl-lab-textview');
    this.node.dataset.language = request.language;

    const header = document.createElement('div');
    header.className = 'pl-lab-textview-header';
    const lineCount = request.text.split('\n').length;
    header.append(
      span('pl-lab-textview-title', request.title),
      span('pl-lab-badge', request.language || 'text'),
      span(
        'pl-lab-badge',
        `${lineCount.toLocaleString()} line${lineCount === 1 ? '' : 's'}`
      ),
      span('pl-lab-textview-origin', this._origin())
    );
    this._status = document.createElement('div');
    this._status.className = 'pl-lab-textview-status';
    this._status.setAttribute('aria-live', 'polite');
    this._status.textContent = request.sourceMap.length
      ? 'Hover or click a line to see the source line it comes from.'
      : 'No line of this text is linked to a source line.';
    const host = document.createElement('div');
    host.className = 'pl-lab-textview-editor';
    this.node.append(header, this._status, host);

    const support = languageSupport(request.language);
    // The text never changes: its link colours are computed once.
    const links = this.links;
    const colours = StateField.define<DecorationSet>({
      create: state => linkColours(state, links),
      update: value => value,
      provide: field => EditorView.decorations.from(field)
    });
    const state = EditorState.create({
      doc: request.text,
      extensions: [
        jupyterTheme,
        lineNumbers(),
        highlightActiveLine(),
        EditorState.readOnly.of(true),
        // Moving around and searching a long text: CodeMirror's own keys and search
        // panel (it searches the whole text, not just the lines on screen).
        keymap.of([...searchKeymap, ...defaultKeymap]),
        search({ top: true }),
        highlightSelectionMatches(),
        support ?? [],
        colours,
        activeLinesField,
        EditorView.domEventHandlers({
          mousemove: event => this._onMouseMove(event),
          mouseleave: () => this._showText(this._cursorLine, false)
        }),
        EditorView.updateListener.of(update => {
          if (update.selectionSet) {
            const line = update.state.doc.lineAt(
              update.state.selection.main.head
            ).number;
            this._cursorLine = line;
            this._showText(line, true);
          }
        })
      ]
    });
    this.editor = new EditorView({ state, parent: host });
    if (link) {
      link.sourceHovered.connect((_, where) => this._showSource(where), this);
    }
  }

  readonly request: IOpenTextRequest;
  readonly links: LineLinks;
  readonly editor: EditorView;

  /** The notebook this view is linked to (null when it came from elsewhere). */
  get notebookLink(): NotebookLink | null {
    return this._link;
  }

  /** Links the text line (1-based) as hovering it does; `reveal` scrolls the cell to it. */
  showTextLine(line: number | null, reveal = false): void {
    this._showText(line, reveal);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._link?.dispose();
    this.editor.destroy();
    super.dispose();
  }

  protected onActivateRequest(msg: Message): void {
    this.editor.focus();
  }

  private _origin(): string {
    const labels = [...new Set(this.request.sources.map(s => s.label))];
    if (!labels.length) {
      return '';
    }
    const from = labels.join(', ');
    return this._link ? `from ${from} in ${this._link.name}` : `from ${from}`;
  }

  private _onMouseMove(event: MouseEvent): void {
    const pos = this.editor.posAtCoords({ x: event.clientX, y: event.clientY });
    const line = pos === null ? null : this.editor.state.doc.lineAt(pos).number;
    if (line !== this._hoverLine) {
      this._hoverLine = line;
      this._showText(line ?? this._cursorLine, false);
    }
  }

  /** A text line is hovered or selected: light up its source line and its siblings. */
  private _showText(line: number | null, reveal: boolean): void {
    const where = line === null ? null : this.links.sourceOf(line);
    if (!where || line === null) {
      this._setActive([]);
      this._link?.highlight(null, []);
      if (line !== null && this.request.sourceMap.length) {
        this._status.textContent = `Line ${line} is not linked to a source line.`;
      }
      return;
    }
    this._setActive(this.links.textLinesOf(where.source, where.line));
    this._describe(where);
    this._link?.highlight(where.source, [where.line]);
    if (reveal) {
      void this._link?.reveal(where.source, where.line);
    }
  }

  /** A source line is hovered in the notebook: light up its text lines here. */
  private _showSource(where: ISourceLine | null): void {
    if (!where) {
      this._setActive([]);
      this._link?.highlight(null, []);
      return;
    }
    const lines = this.links.textLinesOf(where.source, where.line);
    this._setActive(lines);
    this._link?.highlight(where.source, lines.length ? [where.line] : []);
    this._describe(where, lines.length);
    if (lines.length) {
      const from = this.editor.state.doc.line(
        Math.min(lines[0], this.editor.state.doc.lines)
      ).from;
      const visible = this.editor.visibleRanges.some(
        r => r.from <= from && from <= r.to
      );
      if (!visible) {
        this.editor.dispatch({
          effects: EditorView.scrollIntoView(from, { y: 'center' })
        });
      }
    }
  }

  private _describe(where: ISourceLine, count?: number): void {
    const text = this.links.sourceText(where.source, where.line);
    const linked = this._link?.cellFor(where.source);
    const parts = [this.links.describe(where)];
    if (count !== undefined) {
      parts.push(
        count ? `${count} line${count === 1 ? '' : 's'} here` : 'no line here'
      );
    }
    if (text !== null) {
      parts.push(text.trim());
    }
    if (linked?.stale) {
      parts.push('(the cell changed since: not highlighted)');
    }
    this._status.textContent = parts.join(' \u00b7 ');
  }

  private _setActive(lines: number[]): void {
    this.node.dataset.activeLines = String(lines.length);
    this.editor.dispatch({ effects: setActiveLines.of(lines) });
  }

  private _link: NotebookLink | null;
  private _status: HTMLDivElement;
  private _hoverLine: number | null = null;
  private _cursorLine: number | null = null;
}
