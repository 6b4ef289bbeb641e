/**
 * @jest-environment jsdom
 */
// The inspector: header, tab bar, one pane from its trait, and the request route.
import { renderInspector as render, requests } from '../../widget/inspector';
import { FakeModel, settle } from './fakes';
import { HEADER, overview, TABS, XSS } from './fixtures';

function inspector(traits: { [name: string]: unknown } = {}) {
  const model = new FakeModel({
    header: HEADER,
    tabs: TABS,
    selected: 'overview',
    problem: null,
    pane_overview: overview(),
    pane_source: null,
    pane_jaxpr: { error: 'Jaxpr could not be built: boom' },
    pane_run: null,
    ...traits
  });
  const el = document.createElement('div');
  const dispose = render({ model, el });
  return { model, el, dispose };
}

describe('the inspector', () => {
  it('draws the header, the tabs and the selected pane', () => {
    const { el } = inspector();
    expect(el.querySelector('.pl-brand')?.textContent).toBe('pallaslab');
    expect(el.querySelector('.pl-title')?.textContent).toBe('add');
    expect(el.querySelector('.pl-pass')?.textContent).toContain(
      'matches reference'
    );
    const tabs = Array.from(el.querySelectorAll('.pl-tab')).map(
      t => t.textContent
    );
    expect(tabs).toEqual(['Kernels', 'Source', 'Jaxpr', 'Run']);
    const pane = el.querySelector('.pl-body') as HTMLElement;
    expect(pane.dataset.tab).toBe('overview');
    expect(pane.querySelector('.pl-kernel h4')?.textContent).toBe(XSS);
    expect(el.querySelector('img')).toBeNull();
  });

  it('selects a tab through the model, and shows loading and error panes', () => {
    const { model, el } = inspector();
    (el.querySelector('.pl-tab[data-tab="source"]') as HTMLElement).click();
    expect(model.get('selected')).toBe('source');
    expect(model.saves).toBe(1);
    expect(el.querySelector('.pl-loading')?.textContent).toContain('Loading');
    model.set('pane_source', { files: [] });
    expect(el.querySelector('.pl-body')?.textContent).toContain('No source');
    model.set('selected', 'jaxpr');
    expect(el.querySelector('.pl-body .pl-problem')?.textContent).toContain(
      'boom'
    );
  });

  it('redraws a pane only when it is the one shown', () => {
    const { model, el } = inspector();
    const before = el.querySelector('.pl-body .pl-kernel');
    model.set('pane_run', { result: null, message: 'Not run' });
    expect(el.querySelector('.pl-body .pl-kernel')).toBe(before);
  });

  it('shows the problem banner as text', () => {
    const { el } = inspector({
      problem: {
        where: 'Cell line 7',
        summary: XSS,
        hint: 'do this',
        kind: 'error'
      }
    });
    const banner = el.querySelector('[role="alert"]') as HTMLElement;
    expect(banner.textContent).toContain('Cell line 7: ');
    expect(banner.textContent).toContain(XSS);
    expect(banner.querySelector('img')).toBeNull();
  });

  it('lets go of every listener when disposed', () => {
    const { model, dispose } = inspector();
    expect(model.listeners('change:selected')).toBe(1);
    dispose();
    for (const event of ['change:selected', 'msg:custom', 'change:pane_run']) {
      expect(model.listeners(event)).toBe(0);
    }
  });
});

describe('requests', () => {
  it('send the tab, an id and the body, and resolve with the matching reply', async () => {
    const model = new FakeModel({});
    const { requester, onMessage } = requests(model);
    const asked = requester('overview')({ kind: 'hints', kernel: 0 });
    const other = requester('tiles')({
      kind: 'accesses',
      kernel: 0,
      program: [1]
    });
    expect(model.sent).toEqual([
      { tab: 'overview', id: 1, body: { kind: 'hints', kernel: 0 } },
      {
        tab: 'tiles',
        id: 2,
        body: { kind: 'accesses', kernel: 0, program: [1] }
      }
    ]);
    onMessage({ tab: 'tiles', id: 2, reply: { error: 'second' } });
    onMessage({ tab: 'overview', id: 1, reply: { error: 'first' } });
    onMessage({ tab: 'overview', id: 1, reply: { error: 'again' } });
    expect(await asked).toEqual({ error: 'first' });
    expect(await other).toEqual({ error: 'second' });
  });

  it('end with an error when the kernel never answers', async () => {
    const model = new FakeModel({});
    const { requester } = requests(model);
    const reply = await requester('ir')({ textKey: 'k', chunk: -1 }, 5);
    expect(reply).toEqual({
      error: 'the kernel did not answer (is it running?)'
    });
    await settle();
  });
});
