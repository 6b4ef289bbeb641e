/**
 * @jest-environment jsdom
 */
// The Kernels tab: facts, operands, races, and hints completed by a request.
import { OVERVIEW } from '../../widget/tabs/overview';
import { fakeContext, settle } from './fakes';
import { hints, overview } from './fixtures';

describe('the Kernels tab', () => {
  it('draws each kernel from its model', () => {
    const root = document.createElement('div');
    OVERVIEW.render(
      root,
      overview(),
      fakeContext(() => ({ error: 'unused' }))
    );
    expect(root.querySelector('.pl-program')?.textContent).toBe(
      'add(x: f32[256], y: f32[256]) \u2192 f32[256]'
    );
    const facts = root.querySelector('.pl-kernel .pl-facts')?.textContent;
    expect(facts).toBe(
      'grid (2) = 2 programs \u00b7 defined at Cell [3] line 1'
    );
    const row = Array.from(root.querySelectorAll('tbody td')).map(
      td => td.textContent
    );
    expect(row).toEqual([
      'in',
      'x_ref',
      'f32[256]',
      '(128,)',
      'lambda i: (i,)',
      'default',
      '512 B'
    ]);
    expect(root.textContent).toContain('compiler params (triton): num_warps=4');
    expect(root.querySelector('[data-races="gpu"]')?.className).toContain(
      'pl-clean'
    );
    expect(root.querySelector('.pl-hint-warning')?.textContent).toContain(
      'Cell [3] line 4: The grid runs 2 programs.'
    );
    expect(root.querySelector('.pl-notice')?.textContent).toBe('a notice');
  });

  it('asks for the masked-lane hints when they were not checked', async () => {
    const root = document.createElement('div');
    const reply = hints(true);
    reply.hints[0].message = 'checked with masks';
    const ctx = fakeContext(() => reply);
    OVERVIEW.render(root, overview(false), ctx);
    expect(ctx.asked).toEqual([{ kind: 'hints', kernel: 0 }]);
    await settle();
    expect(root.querySelector('.pl-hints')?.textContent).toContain(
      'checked with masks'
    );
  });

  it('asks nothing when the masks were checked', () => {
    const ctx = fakeContext(() => ({ error: 'unused' }));
    OVERVIEW.render(document.createElement('div'), overview(true), ctx);
    expect(ctx.asked).toEqual([]);
  });
});
