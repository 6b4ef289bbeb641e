/**
 * @jest-environment jsdom
 */
// The Diff tab: the summary first, figures by group, each IR side by side.
import type { IDiffPane } from '../../contracts';
import { renderInspector as render } from '../../widget/inspector';
import { DIFF } from '../../widget/tabs/diff';
import { FakeModel, fakeContext } from './fakes';
import { XSS } from './fixtures';

export const DIFF_PANE: IDiffPane = {
  aName: '_kernel',
  bName: 'this cell',
  aKernel: 'add_kernel',
  bKernel: 'add_kernel',
  chip: 'v5e',
  summary: 'BLOCK 128\u2192256: HBM traffic \u221238%',
  verdict: '',
  groups: [
    {
      id: 'config',
      title: 'Config',
      figures: [
        {
          name: 'BLOCK',
          a: '128',
          b: '256',
          change: '+100%',
          changed: true,
          verdict: '',
          note: ''
        }
      ],
      unchanged: 0
    },
    {
      id: 'tiles',
      title: 'Figures of merit',
      figures: [
        {
          name: 'HBM traffic',
          a: '1 MiB',
          b: '640 KiB',
          change: '\u221238%',
          changed: true,
          verdict: 'better',
          note: ''
        },
        {
          name: 'programs',
          a: '8',
          b: '8',
          change: '',
          changed: false,
          verdict: '',
          note: ''
        }
      ],
      unchanged: 0
    },
    { id: 'kernel', title: 'Kernel', figures: [], unchanged: 5 }
  ],
  irs: [
    {
      title: 'Mosaic TPU',
      aTarget: 'mosaic-tpu:v5e',
      bTarget: 'mosaic-tpu:v5e',
      language: 'mlir',
      description: 'Mosaic TPU: 1 changed of 9 lines',
      aError: '',
      bError: '',
      changed: 1,
      lines: 9,
      rows: [
        {
          op: 'gap',
          aLine: null,
          bLine: null,
          aText: '',
          bText: '',
          aSources: [],
          bSources: [],
          hidden: 4
        },
        {
          op: 'equal',
          aLine: 5,
          bLine: 5,
          aText: 'func.func',
          bText: 'func.func',
          aSources: [],
          bSources: [],
          hidden: 0
        },
        {
          op: 'replace',
          aLine: 6,
          bLine: 6,
          aText: '%0 = vector.load : vector<8x128xf32>',
          bText: XSS,
          aSources: [
            { label: 'Cell [1]', line: 7, text: 'o_ref[...] = x_ref[...]' }
          ],
          bSources: [{ label: 'Cell [2]', line: 7, text: XSS }],
          hidden: 0
        },
        {
          op: 'insert',
          aLine: null,
          bLine: 7,
          aText: '',
          bText: 'scf.yield',
          aSources: [],
          bSources: [],
          hidden: 0
        }
      ],
      more: 2
    },
    {
      title: 'kernel jaxpr',
      aTarget: 'jaxpr',
      bTarget: 'jaxpr',
      language: 'jaxpr',
      description: 'kernel jaxpr: no change (4 lines)',
      aError: '',
      bError: '',
      changed: 0,
      lines: 4,
      rows: [],
      more: 0
    }
  ],
  notes: ['no PTX here']
};

describe('the Diff tab', () => {
  it('colours the summary of a fix green and of a regression red', () => {
    for (const [verdict, cls] of [
      ['better', 'pl-diff-summary pl-diff-better'],
      ['worse', 'pl-diff-summary pl-diff-worse']
    ] as const) {
      const root = document.createElement('div');
      DIFF.render(
        root,
        { ...DIFF_PANE, verdict, summary: 'fixed: check differs\u2192matches' },
        fakeContext(() => ({ error: '' }))
      );
      expect(root.firstElementChild?.className).toBe(cls);
      expect(root.firstElementChild?.textContent).toBe(
        'fixed: check differs\u2192matches'
      );
    }
  });

  it('puts the summary first, then figures, then the IRs side by side', () => {
    const root = document.createElement('div');
    DIFF.render(
      root,
      DIFF_PANE,
      fakeContext(() => ({ error: '' }))
    );
    expect(root.firstElementChild?.className).toBe('pl-diff-summary');
    expect(root.firstElementChild?.textContent).toBe(DIFF_PANE.summary);
    const titles = Array.from(
      root.querySelectorAll('.pl-diff-group-title')
    ).map(t => t.textContent);
    expect(titles).toEqual(['Config', 'Figures of merit', 'Kernel']);
    expect(root.querySelector('.pl-diff-better')?.textContent).toBe(
      '\u221238%'
    );
    expect(root.querySelector('[data-group="kernel"]')?.textContent).toContain(
      '5 unchanged'
    );
    expect(root.querySelector('.pl-diff-same')?.textContent).toContain(
      'programs'
    );

    const rows = Array.from(
      root.querySelectorAll('.pl-diff-ir')[0].querySelectorAll('tbody tr')
    );
    expect(rows.map(r => r.className)).toEqual([
      'pl-diff-gap',
      'pl-diff-row pl-diff-equal',
      'pl-diff-row pl-diff-replace',
      'pl-diff-row pl-diff-insert'
    ]);
    expect(rows[0].textContent).toBe('\u2026 4 equal lines');
    const changed = rows[2].querySelectorAll('td');
    expect(changed).toHaveLength(6);
    expect(changed[0].textContent).toBe('6');
    expect(changed[2].classList.contains('pl-diff-old')).toBe(true);
    expect(changed[5].classList.contains('pl-diff-new')).toBe(true);
    expect(changed[1].textContent).toBe('Cell [1]:7');
    expect(changed[1].querySelector('span')?.getAttribute('title')).toBe(
      'o_ref[...] = x_ref[...]'
    );
    expect(changed[4].textContent).toBe('Cell [2]:7');
    // Untrusted text stays text.
    expect(changed[5].textContent).toBe(XSS);
    expect(root.querySelector('img')).toBeNull();
    expect(
      rows[3].querySelectorAll('td')[2].classList.contains('pl-diff-old')
    ).toBe(false);
    expect(root.textContent).toContain('2 more changed lines');

    const unchanged = root.querySelectorAll(
      '.pl-diff-ir'
    )[1] as HTMLDetailsElement;
    expect(unchanged.open).toBe(false);
    expect(unchanged.textContent).toBe('kernel jaxpr: no change (4 lines)');
    expect(root.textContent).toContain('Note: no PTX here');
  });

  it('wraps long lines unless asked not to, and remembers the choice', () => {
    const root = document.createElement('div');
    const ctx = fakeContext(() => ({ error: '' }));
    DIFF.render(root, DIFF_PANE, ctx);
    const table = root.querySelector('.pl-diff-lines')!;
    expect(table.classList.contains('pl-wrap')).toBe(true);
    const toggle = root.querySelector('.pl-wrap-toggle') as HTMLInputElement;
    toggle.checked = false;
    toggle.dispatchEvent(new Event('change'));
    expect(table.classList.contains('pl-wrap')).toBe(false);
    const again = document.createElement('div');
    DIFF.render(again, DIFF_PANE, ctx);
    expect(
      again.querySelector('.pl-diff-lines')!.classList.contains('pl-wrap')
    ).toBe(false);
  });

  it('is the one tab of a diff view, with its own badges', () => {
    const model = new FakeModel({
      header: {
        name: 'diff _kernel \u2192 this cell',
        backend: '',
        mode: '',
        kernels: [],
        check: null,
        badges: ['kernel add_kernel', 'figures for v5e']
      },
      tabs: [{ id: 'diff', title: 'Diff' }],
      selected: 'diff',
      problem: null,
      pane_diff: DIFF_PANE
    });
    const el = document.createElement('div');
    render({ model, el });
    const badges = Array.from(el.querySelectorAll('.pl-badge')).map(
      b => b.textContent
    );
    expect(badges).toEqual(['kernel add_kernel', 'figures for v5e']);
    expect(
      Array.from(el.querySelectorAll('.pl-tab')).map(t => t.textContent)
    ).toEqual(['Diff']);
    expect(el.querySelector('.pl-diff-summary')?.textContent).toBe(
      DIFF_PANE.summary
    );
  });
});
