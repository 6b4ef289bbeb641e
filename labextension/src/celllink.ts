/**
 * The notebook side of a text view's links: finds the cells its source lines
 * come from, highlights lines in their editors, and reports which source line
 * the mouse is on in those cells.
 */

import { EditorView } from '@codemirror/view';
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type { CodeMirrorEditor } from '@jupyterlab/codemirror';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { lineHighlight } from './linehighlight';
import { ICellMatch, ISourceLine, ISourceWindow, matchCell } from './linemap';

/** The class of a cell line linked to the hovered text line. */
export const CELL_LINE_CLASS = 'pl-lab-cell-linked';

const { setLines: setLinkedLines, field: linkedLinesField } =
  lineHighlight(CELL_LINE_CLASS);

const injected = new WeakSet<EditorView>();

function cellView(cell: Cell): EditorView | null {
  const editor = cell.editor as CodeMirrorEditor | null;
  const view = editor?.editor;
  if (!editor || !view) {
    return null;
  }
  if (!injected.has(view)) {
    editor.injectExtension(linkedLinesField);
    injected.add(view);
  }
  return view;
}

/** A source window found in the notebook. */
export interface ILinkedCell extends ICellMatch {
  cell: Cell;
}

/** The notebook end of one text view's links. */
export class NotebookLink implements IDisposable {
  constructor(panel: NotebookPanel, sources: ISourceWindow[]) {
    this.panel = panel;
    this._sources = sources;
    this._onMouseMove = this._onMouseMove.bind(this);
    panel.content.node.addEventListener('mousemove', this._onMouseMove);
    panel.content.node.addEventListener('mouseleave', this._onMouseLeave);
    panel.disposed.connect(this.dispose, this);
  }

  readonly panel: NotebookPanel;

  /** The notebook's name, for the view's header. */
  get name(): string {
    return (
      this.panel.context.localPath.split('/').pop() ?? this.panel.title.label
    );
  }

  /** The source line the mouse is on in a linked cell; null when it leaves. */
  get sourceHovered(): ISignal<this, ISourceLine | null> {
    return this._sourceHovered;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** The cell a source window comes from (looked up afresh: cells move and change). */
  cellFor(source: number): ILinkedCell | null {
    const window = this._sources[source];
    if (!window || this._disposed) {
      return null;
    }
    const cells = this.panel.content.widgets;
    const match = matchCell(
      window,
      cells.map(cell => ({
        source: cell.model.sharedModel.getSource(),
        executionCount:
          cell.model.type === 'code'
            ? (cell.model as ICodeCellModel).executionCount
            : null
      }))
    );
    return match ? { ...match, cell: cells[match.index] } : null;
  }

  /** Highlights `lines` of the cell of `source` (and clears the last highlight). */
  highlight(source: number | null, lines: number[]): void {
    if (this._highlighted) {
      const view = this._highlighted.editor
        ? cellView(this._highlighted)
        : null;
      view?.dispatch({ effects: setLinkedLines.of([]) });
      this._highlighted = null;
    }
    if (source === null || !lines.length) {
      return;
    }
    const linked = this.cellFor(source);
    if (!linked || linked.stale) {
      return;
    }
    const view = cellView(linked.cell);
    if (view) {
      view.dispatch({ effects: setLinkedLines.of(lines) });
      this._highlighted = linked.cell;
    }
  }

  /** Scrolls the notebook to a source line's cell and the line into view. */
  async reveal(source: number, line: number): Promise<void> {
    const linked = this.cellFor(source);
    if (!linked || linked.stale) {
      return;
    }
    await this.panel.content.scrollToCell(linked.cell, 'smart');
    const view = cellView(linked.cell);
    if (view && line >= 1 && line <= view.state.doc.lines) {
      view.dispatch({
        effects: EditorView.scrollIntoView(view.state.doc.line(line).from, {
          y: 'nearest'
        })
      });
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this.highlight(null, []);
    this._disposed = true;
    this.panel.content.node.removeEventListener('mousemove', this._onMouseMove);
    this.panel.content.node.removeEventListener(
      'mouseleave',
      this._onMouseLeave
    );
    this.panel.disposed.disconnect(this.dispose, this);
    Signal.clearData(this);
  }

  private _onMouseMove(event: MouseEvent): void {
    if (this._frame) {
      this._pending = event;
      return;
    }
    this._pending = event;
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      const latest = this._pending;
      this._pending = null;
      if (latest && !this._disposed) {
        this._report(this._sourceLineAt(latest));
      }
    });
  }

  private _onMouseLeave = (): void => {
    this._report(null);
  };

  private _report(where: ISourceLine | null): void {
    const last = this._lastHover;
    if (
      last === where ||
      (last &&
        where &&
        last.source === where.source &&
        last.line === where.line)
    ) {
      return;
    }
    this._lastHover = where;
    this._sourceHovered.emit(where);
  }

  private _sourceLineAt(event: MouseEvent): ISourceLine | null {
    const target = event.target as Node | null;
    if (!target) {
      return null;
    }
    const cell = this.panel.content.widgets.find(c => c.node.contains(target));
    if (!cell || !cell.editor || !cell.editor.host.contains(target)) {
      return null;
    }
    const source = this._sources.findIndex((_, index) => {
      const linked = this.cellFor(index);
      return linked !== null && !linked.stale && linked.cell === cell;
    });
    if (source < 0) {
      return null;
    }
    const view = cellView(cell);
    const pos = view?.posAtCoords({ x: event.clientX, y: event.clientY });
    if (!view || pos === null || pos === undefined) {
      return null;
    }
    return { source, line: view.state.doc.lineAt(pos).number };
  }

  private _sources: ISourceWindow[];
  private _highlighted: Cell | null = null;
  private _disposed = false;
  private _frame = 0;
  private _pending: MouseEvent | null = null;
  private _lastHover: ISourceLine | null = null;
  private _sourceHovered = new Signal<this, ISourceLine | null>(this);
}
