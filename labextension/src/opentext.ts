/**
 * "Open in new tab": the inspector dispatches a `pallaslab:open-text` event
 * (bubbling, composed) with the text, its language and its line map; JupyterLab
 * opens it as a read-only tab beside the notebook the event came from.
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { NotebookLink } from './celllink';
import { pallaslabIcon } from './icons';
import { IOpenTextRequest, OPEN_TEXT_EVENT } from './linemap';
import { TextView } from './textview';

export { OPEN_TEXT_EVENT };

/** Opens texts in main-area tabs and keeps track of them. */
export class TextViews {
  constructor(app: JupyterFrontEnd, notebooks: INotebookTracker | null) {
    this._app = app;
    this._notebooks = notebooks;
  }

  readonly tracker = new WidgetTracker<MainAreaWidget<TextView>>({
    namespace: 'pallaslab-text'
  });

  /** The notebook panel a DOM node (the inspector's button) is inside. */
  panelOf(origin: Node | null): NotebookPanel | null {
    if (!origin || !this._notebooks) {
      return null;
    }
    return this._notebooks.find(panel => panel.node.contains(origin)) ?? null;
  }

  /** Opens a text beside its notebook (or activates the same text already open). */
  open(
    request: IOpenTextRequest,
    origin: Node | null
  ): MainAreaWidget<TextView> {
    const existing = this.tracker.find(
      widget =>
        widget.content.request.title === request.title &&
        widget.content.request.text === request.text
    );
    if (existing) {
      this._app.shell.activateById(existing.id);
      return existing;
    }
    const panel = this.panelOf(origin);
    const content = new TextView({
      request,
      link: panel ? new NotebookLink(panel, request.sources) : null
    });
    const widget = new MainAreaWidget({ content });
    widget.id = `pallaslab-text-${++this._count}`;
    widget.addClass('pl-lab-textview-panel');
    widget.title.label = request.title;
    widget.title.caption = `${request.title} (${request.language || 'text'}, read-only)`;
    widget.title.icon = pallaslabIcon;
    widget.title.closable = true;
    // Beside the notebook the first time; later texts as tabs next to the last one.
    const previous = this.tracker.currentWidget;
    if (previous && previous.isAttached) {
      this._app.shell.add(widget, 'main', {
        mode: 'tab-after',
        ref: previous.id
      });
    } else {
      this._app.shell.add(widget, 'main', {
        mode: 'split-right',
        ref: panel?.id ?? null
      });
    }
    void this.tracker.add(widget);
    this._app.shell.activateById(widget.id);
    return widget;
  }

  private _app: JupyterFrontEnd;
  private _notebooks: INotebookTracker | null;
  private _count = 0;
}
