/**
 * @jest-environment jsdom
 */
// The Tiles tab: decoding the model's arrays, and the hooks browser tests rely on.
import type { IMosaicGpuModel, TabRequestBody } from '../../contracts';
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

describe('a Mosaic GPU kernel of the Tiles tab', () => {
  beforeEach(() => {
    installFakeCanvas();
  });

  const mosaic: IMosaicGpuModel = {
    ctas: 4,
    grid: [2, 2],
    axisNames: ['m', 'n'],
    threads: 1,
    steps: 2,
    copyMap: true,
    smem: {
      rows: [
        {
          label: 'pipeline buffer of a_gmem',
          kind: 'buffer',
          shape: 'f16[3,128,64]',
          stored: 'f16[3,16,1,8,64]',
          transforms: 'TilingTransform((8, 64)), SwizzleTransform(128)',
          bytes: 49152,
          bytesText: '48 KiB',
          depth: 1,
          atPeak: true,
          pipeline: 0,
          line: 'k.py:9'
        }
      ],
      total: 49176,
      totalText: '48 KiB',
      summary:
        '48 KiB (49,176 bytes) of SMEM: 48 KiB of buffers and 3 barriers',
      chips: [
        {
          chip: 'A100',
          limit: 166912,
          limitText: '163 KiB',
          fits: true,
          share: 0.29,
          blocksPerSm: 3,
          note: 'Mosaic GPU kernels need Hopper (sm_90) or newer; A100 is sm_80.'
        },
        {
          chip: 'H100',
          limit: 232448,
          limitText: '227 KiB',
          fits: false,
          share: 1.2,
          blocksPerSm: 0,
          note: ''
        }
      ]
    },
    copies: [
      {
        kind: 'TMA GMEM \u2192 SMEM',
        operand: 'a_gmem',
        smem: 'pipeline buffer of a_gmem',
        window: 'f16[128,64]',
        bytesEachText: '16 KiB',
        copies: 8,
        totalText: '128 KiB',
        exact: true,
        multicast: 1,
        pipeline: 0,
        line: 'k.py:9'
      }
    ],
    copiesMissing: '',
    mmas: [],
    mmasMissing: 'No matrix product (wgmma, tcgen05_mma or dot).',
    pipelines: [
      {
        index: 0,
        kind: 'emit_pipeline',
        slots: 3,
        steps: 2,
        runs: 1,
        buffers: [
          {
            operand: 'a_gmem',
            window: 'f16[128,64]',
            transforms: 'TilingTransform((8, 64)), SwizzleTransform(128)',
            bytesText: '48 KiB'
          }
        ],
        line: 'k.py:9'
      }
    ],
    pipelinesMissing: '',
    work: {
      flopsText: '0 FLOP',
      mmaFlopsText: '0 FLOP',
      bytesText: '128 KiB',
      exact: true
    },
    persistent: '',
    notices: []
  };

  it('shows shared memory per chip and the pipeline, and asks for no accesses', async () => {
    const asked: TabRequestBody[] = [];
    const ctx = fakeContext(body => {
      asked.push(body);
      return { error: 'not asked' };
    });
    const kernel = {
      ...TILES_KERNEL,
      mosaic,
      accessesNote: 'Mosaic GPU kernels: their traffic is their copies.'
    };
    const root = tilesKernel(kernel, ctx, {});
    await settle(300);
    expect(asked).toEqual([]);
    const accesses = root.querySelector(
      '[data-role="accesses"]'
    ) as HTMLElement;
    expect(accesses.dataset.status).toBe('none');
    expect(accesses.textContent).toContain('their copies');
    const total = root.querySelector('[data-role="smem-total"]') as HTMLElement;
    expect(total.dataset.bytes).toBe('49176');
    const h100 = root.querySelector('[data-chip="H100"]') as HTMLElement;
    expect(h100.dataset.fits).toBe('false');
    expect(h100.textContent).toContain('does not fit');
    const a100 = root.querySelector('[data-chip="A100"]') as HTMLElement;
    expect(a100.textContent).toContain('need Hopper');
    const pipeline = root.querySelector(
      '[data-role="pipeline"]'
    ) as HTMLElement;
    expect(pipeline.dataset.steps).toBe('2');
    expect(pipeline.dataset.slots).toBe('3');
    expect(pipeline.textContent).toContain('SwizzleTransform(128)');
    expect(root.querySelectorAll('[data-role="copy"]')).toHaveLength(1);
    expect(root.textContent).toContain('No matrix product');
  });

  it('says in one sentence when the kernel could not be read', () => {
    const kernel = {
      ...TILES_KERNEL,
      mosaicError: 'pallaslab could not read what this kernel allocates.',
      accessesNote: 'none'
    };
    const root = tilesKernel(kernel, null, {});
    const part = root.querySelector('[data-role="mosaic"]') as HTMLElement;
    expect(part.textContent).toBe(
      'pallaslab could not read what this kernel allocates.'
    );
    expect(root.querySelector('.pl-problem')).toBeNull();
  });
});
