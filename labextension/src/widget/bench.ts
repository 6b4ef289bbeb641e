/**
 * The live benchmark view (anywidget's ES module): progress, then time, TFLOP/s or
 * GB/s vs size (or config), Pallas vs XLA, a roofline and a table. Drawn with SVG
 * elements and text nodes only. Traits typed by the contracts (`IBenchPlan`,
 * `IBenchRow`, `IBenchProgress`, `BenchMetric`).
 */

import type {
  BenchMetric,
  IBenchPlan,
  IBenchRoof,
  IBenchProgress,
  IBenchRow
} from '../contracts';
import { IWidgetModel } from './context';
import { clear, h, svg, table } from './dom';

const IMPL_COLOURS: { [impl: string]: string } = {
  pallas: '#1976d2',
  xla: '#bc4c00'
};
const OTHER_COLOURS = ['#2e7d32', '#6a1b9a', '#00838f', '#ad1457'];
type NumericKey = 'median_ms' | 'tflops' | 'gbps';
const METRIC_KEYS: { [metric: string]: { key: NumericKey; label: string } } = {
  time: { key: 'median_ms', label: 'time (ms) \u2014 median, bars: p25..p75' },
  tflops: { key: 'tflops', label: 'TFLOP/s' },
  gbps: { key: 'gbps', label: 'GB/s' }
};
const W = 640;
const H = 300;
const M = { left: 64, right: 16, top: 12, bottom: 58 };

/** A number in a few significant digits ("-" for none). */
export function num(v: unknown, digits = 3): string {
  if (typeof v !== 'number' || !isFinite(v)) {
    return '-';
  }
  if (Number.isInteger(v) && Math.abs(v) < 1e6) {
    return String(v);
  }
  if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) {
    return v.toExponential(1);
  }
  return String(Number(v.toPrecision(digits)));
}

/** A row's line in the plot: its implementation, and on a cluster its chip kind. */
export function seriesOf(r: IBenchRow): string {
  return r.chip ? `${r.impl} \u00b7 ${r.chip}` : r.impl;
}

function colourOf(impl: string, impls: string[]): string {
  return (
    IMPL_COLOURS[impl] ??
    OTHER_COLOURS[impls.indexOf(impl) % OTHER_COLOURS.length]
  );
}

interface IScale {
  (v: number): number;
  domain: [number, number];
}

function makeScale(
  lo: number,
  hi: number,
  r0: number,
  r1: number,
  log: boolean
): IScale {
  let a = log ? Math.log10(lo) : lo;
  let b = log ? Math.log10(hi) : hi;
  if (!(b > a)) {
    a -= log ? 0.5 : Math.abs(a) * 0.5 || 1;
    b += log ? 0.5 : Math.abs(b) * 0.5 || 1;
  }
  const f = ((v: number) =>
    r0 + (((log ? Math.log10(v) : v) - a) / (b - a)) * (r1 - r0)) as IScale;
  f.domain = [log ? 10 ** a : a, log ? 10 ** b : b];
  return f;
}

/** Round tick values between lo and hi (1-2-5 decades on a log axis). */
export function niceTicks(lo: number, hi: number, log: boolean): number[] {
  if (log) {
    const out: number[] = [];
    for (
      let e = Math.floor(Math.log10(lo));
      e <= Math.ceil(Math.log10(hi));
      e++
    ) {
      for (const m of [1, 2, 5]) {
        const v = m * 10 ** e;
        if (v >= lo * 0.999 && v <= hi * 1.001) {
          out.push(v);
        }
      }
    }
    return out.length > 8
      ? out.filter(v => Math.abs(Math.log10(v) % 1) < 1e-9)
      : out;
  }
  const span = hi - lo || Math.abs(hi) || 1;
  const step0 = 10 ** Math.floor(Math.log10(span / 5));
  const step =
    [1, 2, 5, 10].map(m => m * step0).find(st => span / st <= 6) ?? step0 * 10;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Number(v.toPrecision(12)));
  }
  return out;
}

// Tick labels may hold several lines (a config's "A=1, B=2" is drawn one name per
// line); the plot grows downwards to fit them.
function axesFrame(
  plot: SVGElement,
  y: IScale,
  yTicks: number[],
  xTicks: [number, string][],
  xLabel: string,
  yLabel: string
): void {
  for (const t of yTicks) {
    plot.append(
      svg('line', {
        x1: M.left,
        x2: W - M.right,
        y1: y(t),
        y2: y(t),
        class: 'pl-gridline'
      }),
      svg('text', { x: M.left - 6, y: y(t) + 3, 'text-anchor': 'end' }, num(t))
    );
  }
  let lines = 1;
  for (const [pos, label] of xTicks) {
    plot.append(
      svg('line', {
        x1: pos,
        x2: pos,
        y1: H - M.bottom,
        y2: H - M.bottom + 4,
        class: 'pl-axis'
      })
    );
    const parts = String(label).split(', ');
    lines = Math.max(lines, parts.length);
    plot.append(
      svg(
        'text',
        { x: pos, y: H - M.bottom + 14, 'text-anchor': 'middle' },
        parts.map((part, k) => svg('tspan', { x: pos, dy: k ? 11 : 0 }, part))
      )
    );
  }
  const height = H + (lines - 1) * 11;
  plot.setAttribute('height', String(height));
  plot.append(
    svg('line', {
      x1: M.left,
      x2: W - M.right,
      y1: H - M.bottom,
      y2: H - M.bottom,
      class: 'pl-axis'
    }),
    svg('line', {
      x1: M.left,
      x2: M.left,
      y1: M.top,
      y2: H - M.bottom,
      class: 'pl-axis'
    }),
    svg(
      'text',
      {
        x: (M.left + W - M.right) / 2,
        y: height - 6,
        'text-anchor': 'middle'
      },
      xLabel
    ),
    svg(
      'text',
      {
        x: 12,
        y: (M.top + H - M.bottom) / 2,
        'text-anchor': 'middle',
        transform: `rotate(-90 12 ${(M.top + H - M.bottom) / 2})`
      },
      yLabel
    )
  );
}

function value(r: IBenchRow, key: NumericKey): number {
  return r[key] ?? NaN;
}

function metricPlot(
  plan: Partial<IBenchPlan>,
  rows: IBenchRow[],
  metric: string
): SVGElement {
  const { key, label } = METRIC_KEYS[metric];
  const tune = plan.kind === 'tune';
  const plot = svg('svg', {
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    class: 'pl-plot',
    'data-metric': metric
  });
  const pointRows = rows.filter(r => !(tune && r.impl === 'xla'));
  // One point (a sweep over the cell's own inputs) is no axis: bars, side by side.
  const single = singlePoint(plan, pointRows);
  const categorical =
    tune || single || pointRows.some(r => r.x === null || r.x === undefined);
  const points = [...new Set(pointRows.map(r => r.point))];
  const measured = rows.filter(
    r => isFinite(value(r, key)) && value(r, key) > 0
  );
  if (!measured.length && !pointRows.length) {
    plot.append(
      svg(
        'text',
        { x: W / 2, y: H / 2, 'text-anchor': 'middle' },
        'waiting for the first point\u2026'
      )
    );
    return plot;
  }
  const xs = pointRows
    .map(r => r.x)
    .filter((x): x is number => typeof x === 'number');
  const xLog =
    !categorical &&
    xs.length > 0 &&
    Math.min(...xs) > 0 &&
    Math.max(...xs) / Math.min(...xs) >= 8;
  const band = (W - M.left - M.right) / Math.max(points.length, 1);
  const xScale = categorical
    ? null
    : makeScale(
        Math.min(...xs),
        Math.max(...xs),
        M.left + 20,
        W - M.right - 20,
        xLog
      );
  const x = (r: { point?: string; x?: number | null }) =>
    xScale
      ? xScale(r.x ?? 0)
      : M.left + band * (points.indexOf(r.point ?? '') + 0.5);
  const ys: number[] = [];
  for (const r of measured) {
    ys.push(value(r, key));
    if (metric === 'time') {
      if ((r.p25_ms ?? 0) > 0) {
        ys.push(r.p25_ms as number);
      }
      if ((r.p75_ms ?? 0) > 0) {
        ys.push(r.p75_ms as number);
      }
    }
  }
  const yLo = ys.length ? Math.min(...ys) : 1;
  const yHi = ys.length ? Math.max(...ys) : 10;
  const yLog = !single && yLo > 0 && yHi / yLo > 20;
  const y = makeScale(
    yLog ? yLo / 1.3 : Math.min(0, yLo),
    yHi * (yLog ? 1.3 : 1.08),
    H - M.bottom,
    M.top,
    yLog
  );
  const xTicks: [number, string][] = categorical
    ? points.map(p => [M.left + band * (points.indexOf(p) + 0.5), p])
    : [...new Set(xs)].slice(0, 14).map(v => [x({ x: v }), num(v)]);
  axesFrame(
    plot,
    y,
    niceTicks(y.domain[0], y.domain[1], yLog),
    xTicks,
    single
      ? ''
      : categorical
        ? (plan.x_label ?? '')
        : (plan.x_label ?? '') + (xLog ? ' (log scale)' : ''),
    label + (yLog ? ' (log)' : '')
  );
  const impls = [...new Set(rows.map(seriesOf))];
  for (const impl of impls) {
    const colour = colourOf(impl, impls);
    const mine = measured.filter(r => seriesOf(r) === impl);
    const baseline = mine.length > 0 && mine[0].impl === 'xla';
    if (tune && baseline) {
      for (const r of mine) {
        plot.append(
          svg(
            'line',
            {
              x1: M.left,
              x2: W - M.right,
              y1: y(value(r, key)),
              y2: y(value(r, key)),
              stroke: colour,
              'stroke-dasharray': '6 4',
              'data-impl': r.impl,
              'data-chip': r.chip || undefined
            },
            svg(
              'title',
              {},
              `XLA baseline${r.chip ? ` on ${r.chip}` : ''}: ` +
                `${num(value(r, key))} ${label}`
            )
          )
        );
      }
      continue;
    }
    if (!categorical && mine.length > 1) {
      const sorted = [...mine].sort((a, b) => (a.x ?? 0) - (b.x ?? 0));
      plot.append(
        svg('polyline', {
          points: sorted.map(r => `${x(r)},${y(value(r, key))}`).join(' '),
          fill: 'none',
          stroke: colour,
          'stroke-width': 2
        })
      );
    }
    const barWidth = band / (impls.length + 1);
    for (const r of mine) {
      const spread = single ? barWidth : 6;
      const cx =
        x(r) +
        (categorical && impls.length > 1
          ? (impls.indexOf(impl) - (impls.length - 1) / 2) * spread
          : 0);
      if (single) {
        const top = y(value(r, key));
        plot.append(
          svg(
            'rect',
            {
              x: cx - (barWidth * 0.9) / 2,
              y: top,
              width: barWidth * 0.9,
              height: Math.max(0, H - M.bottom - top),
              fill: colour,
              class: 'pl-plot-bar',
              'data-impl': r.impl,
              'data-chip': r.chip || undefined,
              'data-point': r.point
            },
            svg(
              'title',
              {},
              `${impl} ${r.point}: ${num(value(r, key))} ${label}` +
                (r.cached ? ' (cached)' : '')
            )
          )
        );
      }
      if (metric === 'time' && (r.p25_ms ?? 0) > 0 && (r.p75_ms ?? 0) > 0) {
        plot.append(
          svg('line', {
            x1: cx,
            x2: cx,
            y1: y(r.p25_ms as number),
            y2: y(r.p75_ms as number),
            stroke: colour
          })
        );
      }
      const wrong = r.status === 'wrong';
      if (single && !wrong) {
        continue;
      }
      plot.append(
        svg(
          'circle',
          {
            cx,
            cy: y(value(r, key)),
            r: 4,
            fill: wrong ? '#fff' : colour,
            stroke: wrong ? '#cf222e' : colour,
            'stroke-width': wrong ? 2 : 1,
            'data-impl': r.impl,
            'data-chip': r.chip || undefined,
            'data-point': r.point
          },
          svg(
            'title',
            {},
            `${impl} ${r.point}: ${num(value(r, key))} ${label}` +
              (r.cached ? ' (cached)' : '') +
              (wrong ? ` \u2014 WRONG: ${r.error}` : '')
          )
        )
      );
    }
  }
  for (const r of rows.filter(r =>
    String(r.status || 'ok').startsWith('failed')
  )) {
    if (!points.includes(r.point)) {
      continue;
    }
    plot.append(
      svg(
        'text',
        {
          x: x(r),
          y: H - M.bottom - 4,
          'text-anchor': 'middle',
          class: 'pl-failed-mark',
          style: 'fill:#cf222e;font-size:16px;font-weight:700'
        },
        '\u2717',
        svg('title', {}, `${r.point}: ${r.status}: ${r.error}`)
      )
    );
  }
  return plot;
}

/** The roof a roofline is drawn against: the plan's chip, or one the user picked. */
export function roofOf(
  plan: Partial<IBenchPlan>,
  picked: string
): IBenchRoof | null {
  const roofs = plan.roofs ?? [];
  const chosen = picked ? roofs.find(r => r.name === picked) : undefined;
  if (chosen) {
    return chosen;
  }
  if (!plan.chip) {
    return null;
  }
  return {
    name: plan.chip,
    peak_flops: plan.peak_flops ?? 0,
    peak_bandwidth: plan.peak_bandwidth ?? 0,
    peak_label: plan.peak_label ?? ''
  };
}

/** "roof of [chip]": every chip of the hardware table, the plan's by default. */
function roofPicker(
  plan: Partial<IBenchPlan>,
  picked: string,
  choose: (chip: string) => void
): HTMLElement | null {
  const roofs = plan.roofs ?? [];
  if (!roofs.length) {
    return null;
  }
  const current = roofOf(plan, picked)?.name ?? '';
  const select = h(
    'select',
    {
      class: 'pl-picker',
      'aria-label': 'chip',
      dataset: { role: 'roof-chip' },
      onchange: (e: Event) => choose((e.target as HTMLSelectElement).value)
    },
    current ? null : h('option', { value: '', text: 'choose a chip\u2026' }),
    ...roofs.map(r =>
      h('option', {
        value: r.name,
        text: r.name + (r.name === plan.chip ? ' (this device)' : ''),
        selected: r.name === current ? 'selected' : null
      })
    )
  );
  return h(
    'div',
    { class: 'pl-toolbar pl-roof-toolbar' },
    h('label', { class: 'pl-control' }, 'Roof of ', select)
  );
}

function roofline(
  plan: Partial<IBenchPlan>,
  rows: IBenchRow[],
  picked = '',
  choose: (chip: string) => void = () => undefined
): HTMLElement {
  const wrap = h('div', { class: 'pl-roofline' });
  const placed = rows.filter(
    r => (r.flops ?? 0) > 0 && (r.bytes ?? 0) > 0 && (r.median_ms ?? 0) > 0
  );
  const intensity = (r: IBenchRow) => (r.flops as number) / (r.bytes as number);
  const intensities = [...new Set(placed.map(intensity))];
  const picker = roofPicker(plan, picked, choose);
  if (picker) {
    wrap.append(picker);
  }
  const roof = roofOf(plan, picked);
  if (!roof) {
    wrap.append(
      h('p', {
        class: 'pl-notice',
        text:
          `No roof to draw: this device (${plan.device}) is not in pallaslab's ` +
          'hardware table. Choose a chip above to see where the kernel sits on ' +
          'its roof (from Python, pallaslab.bench(..., chip="H100") and ' +
          'pallaslab.tune(..., chip="v5e") pick one).'
      })
    );
    if (intensities.length) {
      wrap.append(
        h('p', {
          text:
            'Arithmetic intensity: ' +
            intensities.map(v => `${num(v)} FLOP/byte`).join(', ')
        })
      );
    }
    return wrap;
  }
  const peak = roof.peak_flops;
  const bw = roof.peak_bandwidth;
  const ridge = peak / bw;
  const lo = Math.min(ridge / 16, ...intensities.map(v => v / 4));
  const hi = Math.max(ridge * 16, ...intensities.map(v => v * 4));
  const x = makeScale(lo, hi, M.left, W - M.right, true);
  const achieved = placed.map(
    r => (r.flops as number) / ((r.median_ms as number) / 1e3) / 1e12
  );
  const yHi = (peak / 1e12) * 2;
  const yLo = Math.min((bw * lo) / 1e12, ...achieved.filter(v => v > 0)) / 2;
  const y = makeScale(yLo, yHi, H - M.bottom, M.top, true);
  const plot = svg('svg', {
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    class: 'pl-plot',
    'data-metric': 'roofline'
  });
  const xt = niceTicks(lo, hi, true)
    .filter(v => Math.abs(Math.log10(v) % 1) < 1e-9)
    .map(v => [x(v), num(v)] as [number, string]);
  axesFrame(
    plot,
    y,
    niceTicks(yLo, yHi, true),
    xt,
    'arithmetic intensity (FLOP/byte, log)',
    'TFLOP/s (log)'
  );
  const outline: string[] = [];
  for (let k = 0; k <= 64; k++) {
    const v = lo * (hi / lo) ** (k / 64);
    outline.push(`${x(v)},${y(Math.min(peak, v * bw) / 1e12)}`);
  }
  plot.dataset.chip = roof.name;
  plot.append(
    svg(
      'polyline',
      {
        points: outline.join(' '),
        fill: 'none',
        stroke: '#333',
        'stroke-width': 2,
        class: 'pl-roof'
      },
      svg('title', {}, roof.peak_label)
    ),
    svg(
      'text',
      { x: x(ridge) + 4, y: y(peak / 1e12) - 4 },
      `${roof.name} roof \u00b7 ridge ${num(ridge)} FLOP/B`
    )
  );
  const impls = [...new Set(rows.map(seriesOf))];
  if (plan.backend === 'cpu') {
    for (const v of intensities) {
      plot.append(
        svg(
          'line',
          {
            x1: x(v),
            x2: x(v),
            y1: M.top,
            y2: H - M.bottom,
            stroke: '#1976d2',
            'stroke-dasharray': '4 3'
          },
          svg(
            'title',
            {},
            `the kernel's arithmetic intensity: ${num(v)} FLOP/byte`
          )
        )
      );
    }
    wrap.append(
      plot,
      h('p', {
        class: 'pl-notice',
        text:
          'CPU interpret timings are not placed on a GPU/TPU roof. The dashed lines ' +
          "show where the kernel's arithmetic intensity sits: left of the ridge it is " +
          'memory-bound, right of it compute-bound.'
      }),
      h('p', { class: 'pl-facts', text: `Roof: ${roof.peak_label}` })
    );
    return wrap;
  }
  placed.forEach((r, i) => {
    plot.append(
      svg(
        'circle',
        {
          cx: x(intensity(r)),
          cy: y(achieved[i]),
          r: 4,
          fill: colourOf(seriesOf(r), impls),
          'data-impl': r.impl
        },
        svg(
          'title',
          {},
          `${r.impl} ${r.point}: ${num(achieved[i])} TFLOP/s, ` +
            `${num(r.pct_of_peak, 2)}% of the roof`
        )
      )
    );
  });
  wrap.append(plot);
  if (roof.name !== plan.chip) {
    wrap.append(
      h('p', {
        class: 'pl-notice',
        text: `Timed on ${plan.device}, placed on the ${roof.name}'s roof.`
      })
    );
  }
  wrap.append(
    h('p', {
      class: 'pl-facts',
      text: `Roof: ${roof.peak_label}`
    })
  );
  return wrap;
}

const TABLE_COLUMNS: [keyof IBenchRow, string][] = [
  ['impl', 'impl'],
  ['point', 'point'],
  ['median_ms', 'median ms'],
  ['p25_ms', 'p25'],
  ['p75_ms', 'p75'],
  ['tflops', 'TFLOP/s'],
  ['gbps', 'GB/s'],
  ['pct_of_peak', '% of peak'],
  ['compile_ms', 'compile ms'],
  ['status', 'status']
];

// A cluster's columns: shown when some row has them.
const CLUSTER_COLUMNS: [keyof IBenchRow, string][] = [
  ['chip', 'chip'],
  ['worker', 'worker'],
  ['retries', 'retried']
];

/** The table's columns: the usual ones, and a cluster's where some row has them. */
export function tableColumns(rows: IBenchRow[]): [keyof IBenchRow, string][] {
  const extra = CLUSTER_COLUMNS.filter(([k]) => rows.some(r => r[k]));
  return [...TABLE_COLUMNS.slice(0, 2), ...extra, ...TABLE_COLUMNS.slice(2)];
}

function tableCell(r: IBenchRow, k: keyof IBenchRow): string {
  if (k === 'retries') {
    return r.retries ? `${r.retries}x: ${r.retry_reason}` : '';
  }
  return (
    (typeof r[k] === 'number' ? num(r[k], 4) : String(r[k] ?? '')) +
    (k === 'status' && r.cached ? ' (cached)' : '')
  );
}

function rowsTable(rows: IBenchRow[]): HTMLElement {
  const columns = tableColumns(rows);
  return h(
    'div',
    { class: 'pl-bench-table' },
    table(
      columns.map(c => c[1]),
      rows.map(r => columns.map(([k]) => tableCell(r, k)))
    )
  );
}

/** On a cluster, one line per worker: chip kind, configs done, what it times now. */
export function workerLines(progress: Partial<IBenchProgress>): string[] {
  return (progress.workers ?? []).map(w => {
    const doing = w.lost
      ? 'lost (its configs are tried again elsewhere)'
      : w.running
        ? `timing ${w.running}`
        : 'idle';
    return `${w.worker} (${w.chip}): ${w.done} done, ${doing}`;
  });
}

/** The fastest Pallas row that ran and matched (on `chip`, when given). */
export function bestOf(rows: IBenchRow[], chip?: string): IBenchRow | null {
  const ok = rows.filter(
    r =>
      r.impl === 'pallas' &&
      (chip === undefined || r.chip === chip) &&
      r.status === 'ok' &&
      r.correct !== false &&
      (r.median_ms ?? 0) > 0
  );
  return ok.length
    ? ok.reduce((a, b) =>
        (b.median_ms as number) < (a.median_ms as number) ? b : a
      )
    : null;
}

const METRICS: [BenchMetric, string][] = [
  ['time', 'Time'],
  ['tflops', 'TFLOP/s'],
  ['gbps', 'GB/s'],
  ['roofline', 'Roofline'],
  ['table', 'Table']
];

/** The device, said once: "cpu", "gpu \u00b7 NVIDIA H100". */
export function deviceBadge(plan: Partial<IBenchPlan>): string {
  const device = plan.device ?? '';
  const backend = plan.backend ?? '';
  return !backend || device.toLowerCase().includes(backend.toLowerCase())
    ? device
    : `${backend} \u00b7 ${device}`;
}

/** "3 / 8"; a tuning run counts its configs, not the XLA baseline it measures last. */
export function progressCount(
  plan: Partial<IBenchPlan>,
  progress: Partial<IBenchProgress>
): string {
  const done = progress.done || 0;
  const total = progress.total || 0;
  if (plan.kind !== 'tune') {
    return `${done} / ${total}`;
  }
  const configs = Math.max(0, total - (plan.baseline || 0));
  const counted = `${Math.min(done, configs)} / ${configCount(configs)}`;
  return plan.baseline && done > configs
    ? `${counted} \u00b7 XLA baseline`
    : counted;
}

function configCount(count: number): string {
  return `${count} config${count === 1 ? '' : 's'}`;
}

/** Whether a sweep has one point only (the cell's own inputs): drawn as bars. */
export function singlePoint(
  plan: Partial<IBenchPlan>,
  rows: IBenchRow[]
): boolean {
  return plan.kind !== 'tune' && new Set(rows.map(r => r.point)).size === 1;
}

/** The line across a legend marker, as the plot strokes the implementation. */
function legendLine(
  colour: string,
  extra: Record<string, string> = {}
): SVGElement {
  return svg('line', {
    x1: 1,
    x2: 23,
    y1: 6,
    y2: 6,
    stroke: colour,
    'stroke-width': 2,
    ...extra
  });
}

/** A legend marker drawn as the plot draws the implementation. */
function legendMarker(
  impl: string,
  impls: string[],
  plan: Partial<IBenchPlan>,
  rows: IBenchRow[],
  metric: string
): SVGElement {
  const colour = colourOf(impl, impls);
  const marker = svg('svg', {
    width: 24,
    height: 12,
    class: 'pl-legend-marker',
    'data-impl': impl
  });
  const baseline = rows.find(r => seriesOf(r) === impl)?.impl === 'xla';
  if (plan.kind === 'tune' && baseline) {
    marker.dataset.shape = 'dashed';
    marker.append(legendLine(colour, { 'stroke-dasharray': '6 4' }));
    return marker;
  }
  if (metric !== 'table' && metric !== 'roofline' && singlePoint(plan, rows)) {
    marker.dataset.shape = 'bar';
    marker.append(
      svg('rect', { x: 6, y: 1, width: 12, height: 10, fill: colour })
    );
    return marker;
  }
  const mine = rows.filter(
    r => seriesOf(r) === impl && typeof r.x === 'number'
  );
  const lined =
    plan.kind !== 'tune' &&
    metric !== 'roofline' &&
    metric !== 'table' &&
    new Set(mine.map(r => r.x)).size > 1;
  marker.dataset.shape = lined ? 'line' : 'point';
  if (lined) {
    marker.append(legendLine(colour));
  }
  marker.append(svg('circle', { cx: 12, cy: 6, r: 4, fill: colour }));
  return marker;
}

/** A legend entry's words: the XLA baseline said as such, on its chip kind. */
function legendText(series: string, plan: Partial<IBenchPlan>): string {
  const [impl, chip] = series.split(' \u00b7 ');
  if (impl !== 'xla') {
    return series;
  }
  const what =
    plan.kind === 'tune'
      ? 'XLA baseline (reference under jax.jit)'
      : 'XLA (reference under jax.jit)';
  return chip ? `${what} on ${chip}` : what;
}

/**
 * Draws the benchmark view into `el`; returns the clean-up anywidget calls.
 *
 * anywidget takes it from the module's default export (`export default { render }`):
 * a module exporting `render` by name is logged as deprecated for every widget.
 */
export function renderBench({
  model,
  el
}: {
  model: IWidgetModel;
  el: HTMLElement;
}): () => void {
  const root = h('div', { class: 'pallaslab pl-bench' });
  // The chip whose roof the roofline shows, when the user picked one.
  let picked = '';
  const draw = () => {
    clear(root);
    const plan = (model.get('plan') ?? {}) as Partial<IBenchPlan>;
    const rows = (model.get('rows') ?? []) as IBenchRow[];
    const p = (model.get('progress') ?? {}) as Partial<IBenchProgress>;
    const metric = (model.get('metric') as BenchMetric) || 'time';
    root.append(
      h(
        'div',
        { class: 'pl-header' },
        h('span', { class: 'pl-brand', text: 'pallaslab' }),
        h('span', { class: 'pl-title', text: plan.title || 'benchmark' }),
        plan.device
          ? h('span', { class: 'pl-badge pl-device', text: deviceBadge(plan) })
          : null,
        plan.chip
          ? h('span', { class: 'pl-badge', text: `roof: ${plan.chip}` })
          : null
      )
    );
    if (plan.note) {
      root.append(
        h('div', { class: 'pl-cpu-label', role: 'note', text: plan.note })
      );
    }
    for (const notice of plan.notices ?? []) {
      root.append(
        h('p', {
          class: 'pl-notice pl-bench-notice',
          role: 'note',
          text: notice
        })
      );
    }
    const total = p.total || 0;
    const done = p.done || 0;
    const pct = total ? Math.round((100 * done) / total) : 0;
    let status = progressCount(plan, p);
    if (p.state === 'running') {
      status +=
        (p.current ? ` \u00b7 ${p.current}` : '') +
        ` \u00b7 ${num(p.elapsedS, 2)} s` +
        (p.etaS !== null && p.etaS !== undefined
          ? ` \u00b7 ~${num(p.etaS, 2)} s left`
          : '');
    } else if (p.state) {
      status += ` \u00b7 ${p.state}${p.message ? `: ${p.message}` : ''}`;
    }
    root.append(
      h(
        'div',
        {
          class: 'pl-progress',
          role: 'progressbar',
          'aria-valuenow': pct,
          'aria-valuemin': 0,
          'aria-valuemax': 100
        },
        h(
          'div',
          { class: 'pl-progress-bar' },
          h('div', {
            class: `pl-progress-fill pl-${p.state || ''}`,
            style: `width:${pct}%`
          })
        ),
        h('span', { class: 'pl-progress-text', text: status })
      )
    );
    const workers = workerLines(p);
    if (workers.length) {
      const compiled = p.compiled
        ? [`${p.compiled} config(s) compiled on the cluster's CPUs`]
        : [];
      root.append(
        h(
          'ul',
          {
            class: 'pl-workers',
            style: 'margin: 2px 10px; padding-left: 18px'
          },
          ...[...workers, ...compiled].map(line => h('li', { text: line }))
        )
      );
    }
    const bar = h('div', { class: 'pl-toolbar', style: 'margin: 4px 10px' });
    for (const [id, title] of METRICS) {
      bar.append(
        h('button', {
          class: 'pl-tab' + (id === metric ? ' pl-selected' : ''),
          dataset: { metric: id },
          text: title,
          onclick: () => {
            model.set('metric', id);
            model.save_changes();
          }
        })
      );
    }
    root.append(bar);
    if (metric === 'table') {
      root.append(rowsTable(rows));
    } else if (metric === 'roofline') {
      root.append(
        roofline(plan, rows, picked, chip => {
          picked = chip;
          draw();
        })
      );
    } else {
      root.append(
        metricPlot(plan, rows, metric in METRIC_KEYS ? metric : 'time')
      );
    }
    const impls = [...new Set(rows.map(seriesOf))];
    root.append(
      h(
        'div',
        { class: 'pl-legend' },
        ...impls.map(i =>
          h(
            'span',
            {},
            legendMarker(i, impls, plan, rows, metric),
            legendText(i, plan)
          )
        )
      )
    );
    if (plan.kind === 'tune' && p.state && p.state !== 'running') {
      const chips = [...new Set(rows.map(r => r.chip).filter(c => c))];
      for (const chip of chips.length ? chips : [undefined]) {
        const best = bestOf(rows, chip);
        const where = chip ? ` on ${chip}` : '';
        root.append(
          h(
            'p',
            { style: 'margin: 4px 10px' },
            h('b', {
              text: best
                ? `Best${where}: ${best.point} (${num(best.median_ms, 4)} ms)`
                : `No config ran and matched the reference${where}.`
            })
          )
        );
      }
    }
    const failures = rows.filter(r => r.error);
    if (failures.length) {
      root.append(
        h(
          'div',
          { class: 'pl-bench-errors' },
          ...failures.map(r =>
            h(
              'div',
              {},
              h('b', {
                text: `${r.point}${r.chip ? ` on ${r.chip}` : ''}: ${r.status}`
              }),
              ' ',
              h('code', { text: r.error })
            )
          )
        )
      );
    }
  };
  const events = [
    'change:rows',
    'change:progress',
    'change:plan',
    'change:metric'
  ];
  for (const e of events) {
    model.on(e, draw);
  }
  draw();
  el.append(root);
  return () => {
    for (const e of events) {
      model.off(e, draw);
    }
  };
}

export default { render: renderBench };
