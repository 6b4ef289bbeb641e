/**
 * @jest-environment jsdom
 */
// The IR tab: a lowering asked for, its text arriving in pieces, linked to source.
import type { IIrLoweredReply, TabRequestBody } from '../../contracts';
import { IR } from '../../widget/tabs/ir';
import { fakeContext, settle } from './fakes';
import { IR as IR_PANE } from './fixtures';

const SUMMARY: IIrLoweredReply = {
  type: 'lowered',
  key: { kernel: 0, target: 'triton', stage: '' },
  kernel: 'add_kernel',
  language: 'mlir',
  header: 'Triton IR (TTIR)',
  notes: ['a note'],
  seconds: 0.5,
  error: null,
  resources: {
    kind: 'gpu',
    summary: 'sm_90 \u00b7 32 registers/thread',
    facts: [['architecture', 'sm_90']],
    occupancy: []
  },
  stages: [],
  finalTitle: "Triton IR (TTIR): the target's own text.",
  stageTitles: [],
  lines: 3,
  chunks: 2,
  mapped: 1,
  costs: [],
  costNote: '',
  unlinked: ''
};

function answer(body: TabRequestBody) {
  if ('type' in body && body.type === 'lower') {
    return SUMMARY;
  }
  if ('type' in body && body.type === 'chunk') {
    return body.index === 0
      ? {
          type: 'chunk' as const,
          index: 0,
          first: 1,
          lines: ['module {', '  %0 = arith.addf %a, %b'],
          map: [[2, 0, 2]] as [number, number, number][],
          last: false
        }
      : {
          type: 'chunk' as const,
          index: 1,
          first: 3,
          lines: ['}'],
          map: [],
          last: true
        };
  }
  return { error: 'unexpected' };
}

describe('the IR tab', () => {
  it('lowers, fetches every piece and says how much is linked', async () => {
    const root = document.createElement('div');
    const ctx = fakeContext(answer);
    IR.render(root, IR_PANE, ctx);
    expect(root.querySelector('.pl-ir-status')?.textContent).toBe(
      'Lowering\u2026'
    );
    await settle();
    await settle();
    expect(ctx.asked).toEqual([
      { type: 'lower', kernel: 0, target: 'triton', stage: '' },
      { type: 'chunk', index: 0, kernel: 0, target: 'triton', stage: '' },
      { type: 'chunk', index: 1, kernel: 0, target: 'triton', stage: '' }
    ]);
    expect(root.querySelector('.pl-toolbar .pl-ir-status')?.textContent).toBe(
      '3 lines, 1 linked to source \u00b7 lowered in 0.5 s'
    );
    expect(root.querySelector('.pl-ir-header')?.textContent).toContain(
      'a note'
    );
    expect(root.querySelector('.pl-ir-resources summary')?.textContent).toBe(
      'Resources: sm_90 \u00b7 32 registers/thread'
    );
    expect(
      root.querySelectorAll('.pl-split .pl-code-title')[0]?.textContent
    ).toBe('Cell [3]');
  });

  it('puts the static cost of each source line in a gutter beside it', async () => {
    const root = document.createElement('div');
    const summary: IIrLoweredReply = {
      ...SUMMARY,
      key: { kernel: 0, target: 'tpu-compile:v5e', stage: '' },
      language: 'llo',
      costs: [
        {
          file: 0,
          line: 2,
          text: '12b vld 16 VPU 8',
          title: '32 ops in 12 bundles'
        }
      ],
      costNote: 'Static cost: 65 bundles per pass of the body'
    };
    const ctx = fakeContext(body =>
      'type' in body && body.type === 'lower' ? summary : answer(body)
    );
    IR.render(root, IR_PANE, ctx);
    await settle();
    await settle();
    const gutter = Array.from(root.querySelectorAll('.pl-gutter'));
    expect(gutter.length).toBeGreaterThan(1); // every line has one: a steady column
    const costed = gutter.find(g => g.textContent);
    expect(costed?.textContent).toBe('12b vld 16 VPU 8');
    expect(costed?.getAttribute('title')).toBe('32 ops in 12 bundles');
    expect(costed?.closest('.pl-line')?.getAttribute('data-line')).toBe('2');
    expect(root.querySelector('.pl-cost-note')?.textContent).toContain(
      '65 bundles per pass'
    );
  });

  it('shows why a target could not lower', async () => {
    const root = document.createElement('div');
    IR.render(
      root,
      IR_PANE,
      fakeContext(() => ({ type: 'failed', message: 'no triton here' }))
    );
    await settle();
    expect(root.querySelector('.pl-problem')?.textContent).toBe(
      'no triton here'
    );
  });

  it('offers every target by group', () => {
    const root = document.createElement('div');
    IR.render(
      root,
      IR_PANE,
      fakeContext(() => ({ error: '' }))
    );
    const groups = Array.from(root.querySelectorAll('optgroup')).map(
      g => g.label
    );
    expect(groups).toEqual(['GPU', 'TPU']);
  });

  it('explains "final" and every stage, and says why a text links to no line', async () => {
    const unlinked = 'XLA strips source locations from Triton kernels.';
    const stages: IIrLoweredReply = {
      ...SUMMARY,
      key: { kernel: 0, target: 'xla-gpu:H100', stage: '' },
      language: 'sass',
      stages: ['ptx', 'ptxas'],
      finalTitle: 'The SASS XLA compiled for the H100.',
      stageTitles: ['PTX, the virtual instruction set.', "ptxas' report."],
      chunks: 1,
      mapped: 0,
      unlinked
    };
    const root = document.createElement('div');
    IR.render(
      root,
      { ...IR_PANE, initial: { kernel: 0, target: 'xla-gpu:H100' } },
      fakeContext(body =>
        'type' in body && body.type === 'lower'
          ? stages
          : {
              type: 'chunk' as const,
              index: 0,
              first: 1,
              lines: ['FADD R0, R1, R2 ;'],
              map: [],
              last: true
            }
      )
    );
    await settle();
    await settle();
    const picker = root.querySelector(
      'select[aria-label="stage"]'
    ) as HTMLSelectElement;
    expect(
      Array.from(picker.options).map(o => [o.value || 'final', o.title])
    ).toEqual([
      ['final', 'The SASS XLA compiled for the H100.'],
      ['ptx', 'PTX, the virtual instruction set.'],
      ['ptxas', "ptxas' report."]
    ]);
    expect(root.querySelector('[data-role="stage-note"]')?.textContent).toBe(
      'final: The SASS XLA compiled for the H100.'
    );
    // Nothing links the SASS to the source: the pane says why and shows the kernel.
    expect(root.querySelector('[data-role="unlinked"]')?.textContent).toBe(
      unlinked
    );
    expect(
      root.querySelectorAll('.pl-split .pl-code-title')[0]?.textContent
    ).toBe('Cell [3]');
  });
});
