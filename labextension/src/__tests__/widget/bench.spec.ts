/**
 * @jest-environment jsdom
 */
// The live benchmark view: progress, plots, the table and the best config.
import type { IBenchPlan, IBenchRow } from '../../contracts';
import {
  bestOf,
  deviceBadge,
  niceTicks,
  num,
  progressCount,
  renderBench as render,
  seriesOf,
  tableColumns,
  workerLines
} from '../../widget/bench';
import * as benchModule from '../../widget/bench';
import * as inspectorModule from '../../widget/inspector';
import { FakeModel } from './fakes';

const PLAN: IBenchPlan = {
  title: 'matmul vs XLA',
  kind: 'tune',
  total: 2,
  x_label: 'config',
  note: 'CPU emulation',
  backend: 'cpu',
  device: 'cpu',
  chip: '',
  peak_flops: 0,
  peak_bandwidth: 0,
  peak_label: '',
  baseline: 0,
  notices: [],
  roofs: []
};

function row(
  point: string,
  ms: number | null,
  extra: Partial<IBenchRow> = {}
): IBenchRow {
  return {
    impl: 'pallas',
    point,
    size: null,
    x: null,
    config: {},
    status: 'ok',
    error: '',
    median_ms: ms,
    p25_ms: ms,
    p75_ms: ms,
    min_ms: ms,
    reps: 3,
    compile_ms: null,
    flops: null,
    bytes: null,
    tflops: null,
    gbps: null,
    pct_of_peak: null,
    correct: true,
    max_abs_err: null,
    mode: 'emulated',
    note: '',
    method: '',
    cached: false,
    chip: '',
    worker: '',
    retries: 0,
    retry_reason: '',
    ...extra
  };
}

describe('the benchmark view', () => {
  it('draws progress, the plot and the best config', () => {
    const rows = [
      row('BLOCK=64', 2),
      row('BLOCK=128', 1),
      row('BLOCK=256', null, {
        status: 'failed to compile',
        error: '<b>boom</b>'
      })
    ];
    const model = new FakeModel({
      plan: PLAN,
      rows,
      progress: { done: 3, total: 3, state: 'finished', message: '' },
      metric: 'time'
    });
    const el = document.createElement('div');
    render({ model, el });
    expect(el.querySelector('.pl-progress-text')?.textContent).toBe(
      '3 / 3 configs \u00b7 finished'
    );
    expect(el.querySelectorAll('circle[data-impl="pallas"]')).toHaveLength(2);
    expect(el.querySelector('.pl-failed-mark')).not.toBeNull();
    expect(el.textContent).toContain('Best: BLOCK=128 (1 ms)');
    expect(el.querySelector('.pl-bench-errors code')?.textContent).toBe(
      '<b>boom</b>'
    );
    (el.querySelector('[data-metric="table"]') as HTMLElement).click();
    expect(model.get('metric')).toBe('table');
    expect(el.querySelectorAll('.pl-bench-table tbody tr')).toHaveLength(3);
  });

  it('shows a cluster sweep per chip kind, with each worker and the retried configs', () => {
    const on = (
      chip: string,
      worker: string,
      extra: Partial<IBenchRow> = {}
    ) => ({
      chip,
      worker,
      ...extra
    });
    const rows = [
      row('BLOCK=64', 2, on('H100', 'node a1b2c3 \u00b7 pid 7')),
      row('BLOCK=64', 3, on('B200', 'node d4e5f6 \u00b7 pid 9')),
      row(
        'BLOCK=128',
        1,
        on('H100', 'node a1b2c3 \u00b7 pid 7', {
          retries: 1,
          retry_reason: 'its node was lost'
        })
      ),
      row('XLA baseline', 5, {
        ...on('H100', 'node a1b2c3 \u00b7 pid 7'),
        impl: 'xla'
      })
    ];
    const progress = {
      done: 4,
      total: 6,
      state: 'finished',
      message: '',
      workers: [
        {
          worker: 'node a1b2c3 \u00b7 pid 7',
          chip: 'H100',
          done: 3,
          running: '',
          lost: false
        },
        {
          worker: 'node d4e5f6 \u00b7 pid 9',
          chip: 'B200',
          done: 1,
          running: 'BLOCK=128',
          lost: false
        },
        {
          worker: 'node 000000 \u00b7 pid 1',
          chip: 'H100',
          done: 0,
          running: '',
          lost: true
        }
      ],
      compiled: 2
    };
    expect(seriesOf(rows[0])).toBe('pallas \u00b7 H100');
    expect(workerLines(progress)).toEqual([
      'node a1b2c3 \u00b7 pid 7 (H100): 3 done, idle',
      'node d4e5f6 \u00b7 pid 9 (B200): 1 done, timing BLOCK=128',
      'node 000000 \u00b7 pid 1 (H100): 0 done, lost (its configs are tried again elsewhere)'
    ]);
    expect(
      tableColumns(rows)
        .map(c => c[1])
        .slice(0, 5)
    ).toEqual(['impl', 'point', 'chip', 'worker', 'retried']);
    expect(tableColumns([row('a', 1)]).map(c => c[0])).not.toContain('chip');
    const model = new FakeModel({ plan: PLAN, rows, progress, metric: 'time' });
    const el = document.createElement('div');
    render({ model, el });
    expect(el.querySelectorAll('.pl-workers li')).toHaveLength(4);
    expect(el.querySelector('.pl-workers')?.textContent).toContain(
      "2 config(s) compiled on the cluster's CPUs"
    );
    expect(el.textContent).toContain('Best on H100: BLOCK=128 (1 ms)');
    expect(el.textContent).toContain('Best on B200: BLOCK=64 (3 ms)');
    // One line of points per chip kind; the baseline dashed, on its chip.
    expect(el.querySelectorAll('circle[data-impl="pallas"]')).toHaveLength(3);
    expect(
      el.querySelector('line[stroke-dasharray="6 4"] title')?.textContent
    ).toBe('XLA baseline on H100: 5 time (ms) \u2014 median, bars: p25..p75');
    (el.querySelector('[data-metric="table"]') as HTMLElement).click();
    expect(el.querySelector('.pl-bench-table')?.textContent).toContain(
      '1x: its node was lost'
    );
  });

  it('formats numbers and picks ticks', () => {
    expect(num(1234)).toBe('1234');
    expect(num(0.00012)).toBe('1.2e-4');
    expect(num(null)).toBe('-');
    expect(niceTicks(0, 10, false)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(niceTicks(1, 100, true)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(bestOf([row('a', 3), row('b', 1, { correct: false })])?.point).toBe(
      'a'
    );
  });

  it('says the device once', () => {
    expect(deviceBadge({ backend: 'cpu', device: 'cpu' })).toBe('cpu');
    expect(deviceBadge({ backend: 'gpu', device: 'NVIDIA H100' })).toBe(
      'gpu \u00b7 NVIDIA H100'
    );
    const model = new FakeModel({
      plan: PLAN,
      rows: [],
      progress: { done: 0, total: 2, state: 'running', message: '' },
      metric: 'time'
    });
    const el = document.createElement('div');
    render({ model, el });
    expect(
      Array.from(el.querySelectorAll('.pl-badge')).map(b => b.textContent)
    ).toEqual(['cpu']);
  });

  it('counts configs, not the XLA baseline measured after them', () => {
    const tune = { ...PLAN, total: 5, baseline: 1 };
    const at = (done: number) =>
      progressCount(tune, { done, total: 5, state: 'running' });
    expect(at(2)).toBe('2 / 4 configs');
    expect(at(4)).toBe('4 / 4 configs');
    expect(at(5)).toBe('4 / 4 configs \u00b7 XLA baseline');
    const sweep = { ...PLAN, kind: 'sweep' as const };
    expect(progressCount(sweep, { done: 3, total: 4 })).toBe('3 / 4');
  });

  it('draws one point as bars, with no axis of sizes', () => {
    const sweep = { ...PLAN, kind: 'sweep' as const, x_label: 'size' };
    const point = "the cell's inputs";
    const model = new FakeModel({
      plan: sweep,
      rows: [
        row(point, 2, { x: null }),
        row(point, 1, { impl: 'xla', x: null })
      ],
      progress: { done: 2, total: 2, state: 'finished', message: '' },
      metric: 'time'
    });
    const el = document.createElement('div');
    render({ model, el });
    const bars = Array.from(el.querySelectorAll('rect.pl-plot-bar'));
    expect(bars.map(b => b.getAttribute('data-impl'))).toEqual([
      'pallas',
      'xla'
    ]);
    expect(el.querySelectorAll('circle[data-impl]')).toHaveLength(0);
    const texts = Array.from(el.querySelectorAll('svg.pl-plot text')).map(
      t => t.textContent
    );
    expect(texts).toContain(point);
    expect(texts).not.toContain('size');
    const markers = Array.from(el.querySelectorAll('.pl-legend-marker')).map(
      m => (m as SVGElement).dataset.shape
    );
    expect(markers).toEqual(['bar', 'bar']);
  });

  it('draws legend markers as the plot draws each implementation', () => {
    const tuneModel = new FakeModel({
      plan: PLAN,
      rows: [row('BLOCK=64', 2), row('XLA baseline', 1, { impl: 'xla' })],
      progress: { done: 2, total: 2, state: 'finished', message: '' },
      metric: 'time'
    });
    const el = document.createElement('div');
    render({ model: tuneModel, el });
    // Configs are points; the baseline is a dashed line across the plot.
    expect(
      el
        .querySelector('line[data-impl="xla"]')
        ?.getAttribute('stroke-dasharray')
    ).toBe('6 4');
    const shapes = Array.from(el.querySelectorAll('.pl-legend-marker')).map(
      m => (m as SVGElement).dataset.shape
    );
    expect(shapes).toEqual(['point', 'dashed']);
    expect(
      el
        .querySelector('.pl-legend-marker[data-shape="dashed"] line')
        ?.getAttribute('stroke-dasharray')
    ).toBe('6 4');

    const sweep = { ...PLAN, kind: 'sweep' as const, x_label: 'size' };
    const sized = (impl: string, n: number, ms: number) =>
      row(String(n), ms, { impl, x: n, size: n });
    const sweepModel = new FakeModel({
      plan: sweep,
      rows: [
        sized('pallas', 128, 1),
        sized('pallas', 256, 2),
        sized('xla', 128, 1),
        sized('xla', 256, 3)
      ],
      progress: { done: 4, total: 4, state: 'finished', message: '' },
      metric: 'time'
    });
    const swept = document.createElement('div');
    render({ model: sweepModel, el: swept });
    expect(swept.querySelectorAll('polyline')).toHaveLength(2);
    const lined = Array.from(swept.querySelectorAll('.pl-legend-marker'));
    expect(lined.map(m => (m as SVGElement).dataset.shape)).toEqual([
      'line',
      'line'
    ]);
    expect(
      lined.every(m => m.querySelector('line') && m.querySelector('circle'))
    ).toBe(true);
  });

  it('says what the run will not do', () => {
    const notice = 'No XLA baseline: the reference (--ref) is a value';
    const model = new FakeModel({
      plan: { ...PLAN, notices: [notice] },
      rows: [row('BLOCK=64', 2)],
      progress: { done: 1, total: 1, state: 'finished', message: '' },
      metric: 'time'
    });
    const el = document.createElement('div');
    render({ model, el });
    expect(el.querySelector('.pl-bench-notice')?.textContent).toBe(notice);
  });

  it('draws the roofline of a chip the user picks when the device has none', () => {
    const roofs = [
      {
        name: 'H100',
        peak_flops: 989e12,
        peak_bandwidth: 3.35e12,
        peak_label: 'H100 BF16 dense tensor-core peak'
      },
      {
        name: 'v5e',
        peak_flops: 197e12,
        peak_bandwidth: 0.82e12,
        peak_label: 'TPU v5e BF16 peak'
      }
    ];
    const model = new FakeModel({
      plan: { ...PLAN, roofs },
      rows: [row('BLOCK=64', 2, { flops: 2e9, bytes: 1e6 })],
      progress: { done: 1, total: 1, state: 'finished', message: '' },
      metric: 'roofline'
    });
    const el = document.createElement('div');
    render({ model, el });
    // No chip is known: the view offers every chip rather than an option it lacks.
    expect(el.querySelector('svg[data-metric="roofline"]')).toBeNull();
    expect(el.textContent).not.toContain('pass chip=');
    const picker = el.querySelector(
      'select[data-role="roof-chip"]'
    ) as HTMLSelectElement;
    expect(Array.from(picker.options).map(o => o.value)).toEqual([
      '',
      'H100',
      'v5e'
    ]);
    picker.value = 'v5e';
    picker.dispatchEvent(new Event('change'));
    const plot = el.querySelector('svg[data-metric="roofline"]') as SVGElement;
    expect(plot.dataset.chip).toBe('v5e');
    expect(plot.textContent).toContain('v5e roof');
    // CPU timings are not placed on the roof: the kernel's intensity is.
    expect(plot.querySelectorAll('line[stroke-dasharray="4 3"]')).toHaveLength(
      1
    );
    expect(el.textContent).toContain('Roof: TPU v5e BF16 peak');
  });

  it('is exported as anywidget wants it: a default export, no bare render', () => {
    expect('render' in benchModule).toBe(false);
    expect(typeof benchModule.default.render).toBe('function');
    expect('render' in inspectorModule).toBe(false);
    expect(typeof inspectorModule.default.render).toBe('function');
  });
});
