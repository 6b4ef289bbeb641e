/**
 * The inspector widget (anywidget's ES module): a header, a tab bar and one pane.
 * Panes arrive from Python lazily, each in its own trait (`pane_<tab id>`), so
 * building one sends that pane alone; tabs ask Python for more with `request`.
 * Traits and messages are typed by the contracts (`../contracts.ts`).
 */

import type {
  IHeader,
  IProblemModel,
  ITabInfo,
  ITabReplyMessage,
  Pane,
  PaneId,
  TabReply,
  TabRequestBody
} from '../contracts';
import { IWidgetModel, Requester } from './context';
import { clear, h } from './dom';
import { TABS } from './tabs';

/** How long a request waits for Python before it ends with an error reply. */
export const REQUEST_TIMEOUT_MS = 120000;

function renderProblem(problem: IProblemModel): HTMLElement {
  return h(
    'div',
    { class: 'pl-problem', role: 'alert' },
    h('b', { text: problem.where ? `${problem.where}: ` : '' }),
    h('span', { text: problem.summary }),
    problem.hint
      ? h('div', { class: 'pl-problem-hint', text: problem.hint })
      : null
  );
}

function renderHeader(header: IHeader): HTMLElement {
  const count = header.kernels.length;
  const badges = header.badges ?? [
    header.backend + (header.mode ? ` \u00b7 ${header.mode}` : ''),
    `${count} kernel${count === 1 ? '' : 's'}`
  ];
  const check =
    header.check === null
      ? null
      : h('span', {
          class: `pl-badge ${header.check ? 'pl-pass' : 'pl-fail'}`,
          text: header.check
            ? '\u2713 matches reference'
            : '\u2717 differs from reference'
        });
  return h(
    'div',
    { class: 'pl-header' },
    h('span', { class: 'pl-brand', text: 'pallaslab' }),
    h('span', { class: 'pl-title', text: header.name }),
    ...badges.map(b => h('span', { class: 'pl-badge', text: b })),
    check
  );
}

/** A tab's request route: `model.send` out, a promise of the matching reply back. */
export function requests(model: IWidgetModel): {
  requester: (tab: PaneId) => Requester;
  onMessage: (message: unknown) => void;
} {
  const pending = new Map<number, (reply: TabReply) => void>();
  let next = 1;
  const onMessage = (message: unknown) => {
    const reply = message as ITabReplyMessage | null;
    if (!reply || reply.id === null || reply.id === undefined) {
      return;
    }
    const resolve = pending.get(reply.id);
    if (resolve) {
      pending.delete(reply.id);
      resolve(reply.reply);
    }
  };
  // A kernel that is gone never answers: such requests end with an error reply.
  const requester =
    (tab: PaneId): Requester =>
    (body: TabRequestBody, timeoutMs = REQUEST_TIMEOUT_MS) =>
      new Promise<TabReply>(resolve => {
        const id = next++;
        const timer = setTimeout(() => {
          pending.delete(id);
          resolve({ error: 'the kernel did not answer (is it running?)' });
        }, timeoutMs);
        pending.set(id, reply => {
          clearTimeout(timer);
          resolve(reply);
        });
        model.send({ tab, id, body });
      });
  return { requester, onMessage };
}

/**
 * Draws the inspector into `el`; returns the clean-up anywidget calls.
 *
 * anywidget takes it from the module's default export (`export default { render }`):
 * a module exporting `render` by name is logged as deprecated for every widget.
 */
export function renderInspector({
  model,
  el
}: {
  model: IWidgetModel;
  el: HTMLElement;
}): () => void {
  const root = h('div', { class: 'pallaslab' });
  const state = {};
  const { requester, onMessage } = requests(model);
  model.on('msg:custom', onMessage);
  const bar = h('div', { class: 'pl-tabs', role: 'tablist' });
  const pane = h('div', { class: 'pl-body', role: 'tabpanel' });

  const drawPane = () => {
    clear(pane);
    const id = model.get('selected') as PaneId;
    const data = model.get(`pane_${id}`) as Pane | null | undefined;
    pane.dataset.tab = id;
    if (data === undefined || data === null) {
      pane.append(h('p', { class: 'pl-loading', text: 'Loading\u2026' }));
      return;
    }
    if ('error' in data) {
      pane.append(h('p', { class: 'pl-problem', text: data.error }));
      return;
    }
    const renderer = TABS[id] as
      { render(root: HTMLElement, data: Pane, ctx: unknown): void } | undefined;
    if (!renderer) {
      pane.append(
        h('p', { text: 'This tab needs a newer pallaslab front end.' })
      );
      return;
    }
    try {
      renderer.render(pane, data, {
        model,
        state,
        request: requester(id),
        tab: id
      });
    } catch (err) {
      pane.append(
        h('p', { class: 'pl-problem', text: `Could not draw this tab: ${err}` })
      );
    }
  };

  const draw = () => {
    clear(root);
    root.append(renderHeader(model.get('header') as IHeader));
    const problem = model.get('problem') as IProblemModel | null;
    if (problem) {
      root.append(renderProblem(problem));
    }
    clear(bar);
    const selected = model.get('selected') as PaneId;
    for (const tab of model.get('tabs') as ITabInfo[]) {
      bar.append(
        h('button', {
          class: 'pl-tab' + (tab.id === selected ? ' pl-selected' : ''),
          role: 'tab',
          'aria-selected': tab.id === selected ? 'true' : 'false',
          dataset: { tab: tab.id },
          text: tab.title,
          onclick: () => {
            model.set('selected', tab.id);
            model.save_changes();
          }
        })
      );
    }
    root.append(bar, pane);
    drawPane();
  };

  // A pane that arrives (or is dropped to keep the widget's state small) redraws
  // only when it is the one shown.
  const onPaneOf = ((model.get('tabs') as ITabInfo[] | null) ?? []).map(tab => {
    const handler = () => {
      if (tab.id === model.get('selected')) {
        drawPane();
      }
    };
    model.on(`change:pane_${tab.id}`, handler);
    return [`change:pane_${tab.id}`, handler] as const;
  });
  for (const event of ['change:selected', 'change:header', 'change:problem']) {
    model.on(event, draw);
  }
  draw();
  el.append(root);
  return () => {
    model.off('msg:custom', onMessage);
    for (const [event, handler] of onPaneOf) {
      model.off(event, handler);
    }
    for (const event of [
      'change:selected',
      'change:header',
      'change:problem'
    ]) {
      model.off(event, draw);
    }
  };
}

export default { render: renderInspector };
