/**
 * @jest-environment jsdom
 */
// The Tiles tab: decoding the model's arrays, and the hooks browser tests rely on.
import type { TabRequestBody } from '../../contracts';
import {
  at,
  decode,
  programText,
  search,
  shade,
  unravel
} from '../../widget/tabs/tiles/arrays';
import { TILES, tilesKernel } from '../../widget/tabs/tiles';
import { fakeContext, installFakeCanvas, settle } from './fakes';
import { b64, TILES_KERNEL } from './fixtures';

describe('the tile arrays', () => {
  it('decode little-endian integers of each width', () => {
    expect(
      Array.from(
        decode({ dtype: 'u8', shape: [3], data: b64([1, 2, 255]) }).data
      )
    ).toEqual([1, 2, 255]);
    expect(
      Array.from(
        decode({ dtype: 'u16', shape: [2], data: b64([0, 1, 255, 255]) }).data
      )
    ).toEqual([256, 65535]);
    expect(
      Array.from(
        decode({ dtype: 'i16', shape: [1], data: b64([255, 255]) }).data
      )
    ).toEqual([-1]);
    expect(
      Array.from(
        decode({ dtype: 'i32', shape: [1], data: b64([254, 255, 255, 255]) })
          .data
      )
    ).toEqual([-2]);
    const grid = decode({
      dtype: 'u8',
      shape: [2, 3],
      data: b64([0, 1, 2, 3, 4, 5])
    });
    expect(grid.strides).toEqual([3, 1]);
  });

  it('read per-program values kept only along the axes they vary on', () => {
    const rows = decode({
      dtype: 'u8',
      shape: [4, 1],
      data: b64([0, 8, 16, 24])
    });
    expect(at(rows, [2, 5])).toBe(16);
    const both = decode({
      dtype: 'u8',
      shape: [2, 3],
      data: b64([0, 1, 2, 3, 4, 5])
    });
    expect(at(both, [1, 2])).toBe(5);
  });

  it('place programs, cells and colours', () => {
    expect(unravel(5, [2, 3])).toEqual([1, 2]);
    expect(programText([3])).toBe('(3,)');
    expect(programText([1, 2])).toBe('(1, 2)');
    expect(search([0, 128, 256], 127)).toBe(0);
    expect(search([0, 128, 256], 128)).toBe(1);
    expect(search([0, 128, 256], 999)).toBe(1);
    expect(shade('in', 0, 4)).toBe('#f6f8fa');
    expect(shade('in', 1, 1)).not.toBe(shade('in', 4, 4));
  });
});

describe('a kernel of the Tiles tab', () => {
  let canvas: ReturnType<typeof installFakeCanvas>;
  beforeEach(() => {
    canvas = installFakeCanvas();
  });

  it('lights the first program, then the one scrubbed to, and asks for its accesses', async () => {
    const asked: TabRequestBody[] = [];
    const ctx = fakeContext(body => {
      asked.push(body);
      return { error: 'not in this test' };
    });
    const root = tilesKernel(TILES_KERNEL, ctx, {});
    expect(root.dataset.program).toBe('0');
    expect(root.dataset.highlighted).toBe('2');
    const canvases = root.querySelectorAll('canvas[data-operand]');
    expect(canvases).toHaveLength(2);
    expect((canvases[0] as HTMLElement).dataset.block).toBe('0:128');
    expect(root.querySelector('[data-role="program-label"]')?.textContent).toBe(
      'program (0,) \u00b7 1 of 2'
    );
    expect(root.querySelector('[data-role="order"]')?.textContent).toContain(
      'TPU'
    );
    const scrub = root.querySelector(
      'input[data-role="scrub"]'
    ) as HTMLInputElement;
    scrub.value = '1';
    scrub.dispatchEvent(new Event('input'));
    expect(root.dataset.program).toBe('1');
    expect((canvases[1] as HTMLElement).dataset.block).toBe('128:256');
    expect(root.querySelector('td[data-program="1"]')?.className).toContain(
      'pl-tiles-pinned'
    );
    await settle(300);
    expect(asked).toContainEqual({ kind: 'accesses', kernel: 0, program: [1] });
    const accesses = root.querySelector(
      '[data-role="accesses"]'
    ) as HTMLElement;
    expect(accesses.dataset.status).toBe('error');
    expect(canvas.calls.some(([name]) => name === 'fillRect')).toBe(true);
  });

  it('plays through the programs and stops at the last', async () => {
    const root = tilesKernel(TILES_KERNEL, null, {});
    const play = root.querySelector('[data-role="play"]') as HTMLButtonElement;
    play.click();
    expect(play.textContent).toContain('pause');
    await settle(400);
    expect(root.dataset.program).toBe('1');
    expect(play.textContent).toContain('play');
  });

  it('switches the schedule and the chip of the figures', () => {
    const root = tilesKernel(TILES_KERNEL, null, {});
    const schedule = root.querySelector(
      '[data-role="schedule"]'
    ) as HTMLSelectElement;
    schedule.value = 'gpu';
    schedule.dispatchEvent(new Event('change'));
    expect(root.querySelector('[data-role="order"]')?.textContent).toContain(
      'GPU'
    );
    const figures = root.querySelector('.pl-tiles-figures') as HTMLElement;
    expect(figures.dataset.schedule).toBe('gpu');
    expect(figures.dataset.chip).toBe('H100');
  });

  it('draws kernels without a tile map as their reason', () => {
    const root = document.createElement('div');
    TILES.render(
      root,
      { kernels: [{ index: 0, name: 'k', error: 'grid sized at run time' }] },
      fakeContext(() => ({ error: '' }))
    );
    expect(root.querySelector('.pl-problem')?.textContent).toBe(
      'k: grid sized at run time'
    );
  });
});
