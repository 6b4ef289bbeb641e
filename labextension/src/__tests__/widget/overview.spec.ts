/**
 * @jest-environment jsdom
 */
// The Kernels tab: facts, operands, races, and hints completed by a request.
import { OVERVIEW } from '../../widget/tabs/overview';
import { fakeContext, settle } from './fakes';
import { fit, hints, overview } from './fixtures';

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
    const row = Array.from(
      root.querySelectorAll('.pl-kernel > table tbody td')
    ).map(td => td.textContent);
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

  it('shows the memory per chip, read or estimated', () => {
    const root = document.createElement('div');
    OVERVIEW.render(
      root,
      overview(),
      fakeContext(() => ({ error: 'unused' }))
    );
    const cells = Array.from(
      root.querySelectorAll('.pl-fit-section tbody tr:first-child td')
    ).map(td => td.textContent);
    expect(cells).toEqual([
      'v5e',
      'VMEM',
      '16.1 MiB',
      '16 MiB of 128 MiB',
      'needs a limit',
      '16,908,288'
    ]);
    expect(
      root.querySelector('.pl-fit-fits-with-limit')?.getAttribute('title')
    ).toContain('vmem_limit_bytes=16,908,288');
    expect(root.querySelector('.pl-fit-compile')).toBeNull(); // all read
  });

  it('compiles for every chip when asked, and redraws', async () => {
    const root = document.createElement('div');
    const pane = overview();
    pane.kernels[0].fit = fit(false);
    const ctx = fakeContext(() => fit(true));
    OVERVIEW.render(root, pane, ctx);
    expect(root.querySelector('.pl-fit-section')?.textContent).toContain(
      '(estimated)'
    );
    const button = root.querySelector<HTMLButtonElement>('.pl-fit-compile');
    expect(button).not.toBeNull();
    button?.click();
    expect(ctx.asked).toEqual([{ kind: 'fit', kernel: 0 }]);
    await settle();
    expect(root.querySelector('.pl-fit-compile')).toBeNull();
    expect(root.querySelector('.pl-fit-section')?.textContent).toContain(
      '48 KiB'
    );
  });
});
