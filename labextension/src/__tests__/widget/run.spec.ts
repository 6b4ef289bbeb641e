/**
 * @jest-environment jsdom
 */
// The Run tab: findings, outputs, the verdict and the heatmap of blocks that differ.
import { RUN } from '../../widget/tabs/run';
import { fakeContext } from './fakes';
import { RUN as RUN_PANE } from './fixtures';

describe('the Run tab', () => {
  it('draws the run, its findings and where it differs', () => {
    const root = document.createElement('div');
    RUN.render(
      root,
      RUN_PANE,
      fakeContext(() => ({ error: '' }))
    );
    expect(root.textContent).toContain('Ran on cpu (emulated) in 12.0 ms.');
    const warnings = Array.from(root.querySelectorAll('.pl-warning')).map(
      w => w.textContent
    );
    expect(warnings).toEqual([
      'Padding leak \u2014 Cell [3] line 2: o_ref reads padding',
      'Race (GPU) \u2014 a race',
      'Race (Mosaic GPU interpreter) \u2014 Cell [3] line 4: k: race on a SMEM buffer'
    ]);
    expect(root.querySelector('.pl-verdict.pl-fail')?.textContent).toBe(
      '\u2717 does not match the reference: max abs error 1'
    );
    const rects = Array.from(root.querySelectorAll('rect'));
    expect(rects).toHaveLength(2);
    expect(rects[1].getAttribute('data-count')).toBe('128');
    expect(rects[1].querySelector('title')?.textContent).toBe(
      'block 1: 128 of 128 elements differ'
    );
  });

  it('says why there is no run', () => {
    const root = document.createElement('div');
    RUN.render(
      root,
      { result: null, message: 'Not run' },
      fakeContext(() => ({ error: '' }))
    );
    expect(root.textContent).toBe('Not run');
  });
});
