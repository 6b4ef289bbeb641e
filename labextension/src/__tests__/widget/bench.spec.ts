/**
 * @jest-environment jsdom
 */
// The live benchmark view: progress, plots, the table and the best config.
import type { IBenchPlan, IBenchRow } from '../../contracts';
import { bestOf, niceTicks, num, render } from '../../widget/bench';
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
  peak_label: ''
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
      '3 / 3 \u00b7 finished'
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
});
