/**
 * Saved notebooks: a widget output whose kernel is gone shows "Error displaying
 * widget: model not found" in JupyterLab. For pallaslab's inspector the output
 * also holds a static HTML rendering of every tab; show that instead, rendered
 * by JupyterLab's own HTML renderer (sanitized unless the notebook is trusted).
 */

import type { CodeCell } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { MimeModel } from '@jupyterlab/rendermime';
import { IDisposable } from '@lumino/disposable';
import { Widget } from '@lumino/widgets';

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
/** The class pallaslab's static HTML starts with. */
export const STATIC_MARKER = 'pallaslab-static';
const MODEL_NOT_FOUND = 'model not found';
const FALLBACK_CLASS = 'pl-lab-fallback';

/** Whether an output's data is a pallaslab inspector with a static rendering. */
export function hasStaticFallback(data: { [mime: string]: unknown }): boolean {
  const html = data['text/html'];
  return (
    WIDGET_MIME in data &&
    typeof html === 'string' &&
    html.includes(STATIC_MARKER)
  );
}

/** Watches one notebook and replaces dead pallaslab widgets with their static HTML. */
export class SavedOutputFallback implements IDisposable {
  constructor(panel: NotebookPanel) {
    this._panel = panel;
    this._observer = new MutationObserver(() => this._schedule());
    this._observer.observe(panel.content.node, {
      childList: true,
      subtree: true,
      characterData: true
    });
    panel.disposed.connect(() => this.dispose());
    this._schedule();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._observer.disconnect();
    if (this._timer) {
      clearTimeout(this._timer);
    }
    for (const widget of this._rendered) {
      widget.dispose();
    }
    this._rendered.clear();
  }

  private _schedule(): void {
    if (this._timer || this._disposed) {
      return;
    }
    // Mutations come in bursts while a notebook renders: scan once per burst.
    this._timer = setTimeout(() => {
      this._timer = 0;
      this._scan();
    }, 50);
  }

  private _scan(): void {
    for (const widget of [...this._rendered]) {
      if (!widget.node.isConnected) {
        widget.dispose();
        this._rendered.delete(widget);
      }
    }
    for (const cell of this._panel.content.widgets) {
      if (cell.model.type !== 'code') {
        continue;
      }
      const area = (cell as CodeCell).outputArea;
      if (!area) {
        continue;
      }
      area.widgets.forEach((child, index) => {
        const output = area.model.get(index);
        if (!output || !hasStaticFallback(output.data)) {
          return;
        }
        const rendered = child.node.querySelector(
          '.jp-OutputArea-output'
        ) as HTMLElement | null;
        if (
          !rendered ||
          rendered.querySelector(`.${FALLBACK_CLASS}`) ||
          !(rendered.textContent ?? '').includes(MODEL_NOT_FOUND)
        ) {
          return;
        }
        void this._replace(
          rendered,
          output.data['text/html'] as string,
          output.trusted
        );
      });
    }
  }

  private async _replace(
    host: HTMLElement,
    html: string,
    trusted: boolean
  ): Promise<void> {
    const renderer = this._panel.content.rendermime.createRenderer('text/html');
    await renderer.renderModel(
      new MimeModel({ data: { 'text/html': html }, trusted })
    );
    if (this._disposed || !host.isConnected) {
      renderer.dispose();
      return;
    }
    while (host.firstChild) {
      host.removeChild(host.firstChild);
    }
    const note = document.createElement('div');
    note.className = 'pl-lab-fallback-note';
    note.textContent =
      'Saved pallaslab inspector (static view). Run the cell again for the live inspector.';
    const box = new Widget();
    box.addClass(FALLBACK_CLASS);
    box.node.append(note);
    Widget.attach(box, host);
    Widget.attach(renderer, box.node);
    this._rendered.add(box);
    this._rendered.add(renderer);
  }

  private _panel: NotebookPanel;
  private _observer: MutationObserver;
  private _timer: ReturnType<typeof setTimeout> | 0 = 0;
  private _disposed = false;
  private _rendered = new Set<Widget>();
}
