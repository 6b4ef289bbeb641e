/**
 * One operand of the Tiles tab on a canvas: its array cut into blocks, shaded by
 * read counts, one program's block lit (and the previous one dashed while playing).
 */

import type {
  ITilesKernel,
  ITilesOperand,
  ICoverage
} from '../../../contracts';
import { TILE_COLOURS } from '../../../contracts';
import { h } from '../../dom';
import { at, decode, IArray, search, shade } from './arrays';

/** The narrowest an operand's column is (its title, legend and texts wrap inside). */
const MIN_COLUMN = 220;

/** A hatch pattern (what of a block hangs over the array). */
export function hatch(
  ctx: CanvasRenderingContext2D,
  colour: string = TILE_COLOURS.padding
): CanvasPattern | string {
  const tile = document.createElement('canvas');
  tile.width = tile.height = 8;
  const t = tile.getContext('2d');
  if (!t) {
    return colour;
  }
  t.strokeStyle = colour;
  t.lineWidth = 2;
  t.beginPath();
  t.moveTo(0, 8);
  t.lineTo(8, 0);
  t.stroke();
  return ctx.createPattern(tile, 'repeat') ?? colour;
}

/** An operand of the kernel's tile map, drawn for the program shown. */
export class TilesOperand {
  constructor(op: ITilesOperand, kernel: ITilesKernel) {
    this.op = op;
    this.kernel = kernel;
    const coverage = op.coverage as ICoverage;
    this.starts = (op.starts ?? []).map(decode);
    this.extents = (op.extents ?? []).map(decode);
    this.edges = coverage.edges.map(e => decode(e).data);
    this.counts = decode(coverage.counts);
    this.rows = op.dims.rows;
    this.cols = op.dims.cols ?? 0;
    this.sliced = op.dims.sliced;
    for (const d of this.sliced) {
      this.slice[d] = 0;
    }
    const bounds = op.bounds ?? { rows: [0, 1], cols: [0, 1] };
    const [r0, r1] = bounds.rows;
    const [c0, c1] = bounds.cols;
    this.span = { r0, r1, c0, c1 };
    const spanR = r1 - r0;
    const spanC = c1 - c0;
    const scale = Math.min(360 / spanC, 260 / spanR);
    const width = Math.max(spanC * scale, 24);
    const height = Math.max(this.rows === null ? 28 : spanR * scale, 24);
    this.width = Math.round(width);
    this.height = Math.round(height);
    this.sx = this.width / spanC;
    this.sy = this.height / spanR;
    this.ratio = window.devicePixelRatio || 1;
    this.canvas = h('canvas', {
      class: 'pl-tiles-canvas',
      width: Math.round(this.width * this.ratio),
      height: Math.round(this.height * this.ratio),
      style: `width:${this.width}px;height:${this.height}px`,
      dataset: { operand: op.index, role: op.role }
    });
    const context = this.canvas.getContext('2d');
    this.hatch = context ? hatch(context) : TILE_COLOURS.padding;
    this.info = h('div', { class: 'pl-tiles-info' });
    this.hover = h('div', { class: 'pl-tiles-hover' });
    this.canvas.addEventListener('mousemove', e => this.onHover(e));
    this.canvas.addEventListener('mouseleave', () => {
      this.hover.textContent = '';
    });
    const controls = this.sliced.map(d => {
      const n = op.shape[d];
      const input = h('input', {
        type: 'range',
        min: 0,
        max: n - 1,
        value: 0,
        dataset: { role: 'slice', dim: d },
        oninput: (e: Event) => {
          this.follow = false;
          this.slice[d] = Number((e.target as HTMLInputElement).value);
          this.redraw();
        }
      });
      const follow = h('button', {
        class: 'pl-tiles-small',
        text: 'follow',
        title: "Cut through the program's block",
        onclick: () => {
          this.follow = true;
          this.redraw();
        }
      });
      return h(
        'label',
        { class: 'pl-tiles-slice' },
        `dim ${d} at `,
        h('span', { dataset: { role: 'slice-value', dim: d } }),
        input,
        follow
      );
    });
    const title = h(
      'div',
      { class: 'pl-tiles-title' },
      h('span', { class: `pl-role pl-role-${op.role}`, text: op.role }),
      ' ',
      h('b', { text: op.label }),
      ` ${op.type} \u00b7 block ${op.block}`
    );
    const map = h(
      'div',
      { class: 'pl-tiles-map' },
      h('code', { text: op.indexMap })
    );
    const reads = coverage;
    const range =
      reads.min === reads.max
        ? String(reads.min)
        : `${reads.min}\u2013${reads.max} (mean ${reads.mean})`;
    const legend = h(
      'div',
      { class: 'pl-tiles-legend' },
      h('span', {
        class: 'pl-tiles-swatch',
        style: `background:${shade(op.role, 1, reads.max)}`
      }),
      (op.role === 'out' ? ' written by ' : ' read by ') +
        range +
        ` program${reads.max === 1 ? '' : 's'} per element`,
      reads.never ? ` \u00b7 ${reads.never} element(s) never touched` : '',
      reads.merged ? ' \u00b7 cells merged for drawing' : ''
    );
    // A column as wide as its picture (or the texts' minimum), whatever the program
    // shown: texts that change while scrubbing wrap inside it, never move the others.
    this.el = h(
      'div',
      {
        class: 'pl-tiles-operand',
        dataset: { operand: op.index },
        style: `width:${Math.max(this.width + 2, MIN_COLUMN)}px`
      },
      title,
      map,
      controls,
      this.canvas,
      this.hover,
      this.info,
      legend
    );
  }

  readonly el: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private op: ITilesOperand;
  private kernel: ITilesKernel;
  private starts: IArray[];
  private extents: IArray[];
  private edges: ArrayLike<number>[];
  private counts: IArray;
  private rows: number | null;
  private cols: number;
  private sliced: number[];
  private follow = true;
  private slice: { [dim: number]: number } = {};
  private bases = new Map<string, HTMLCanvasElement>();
  private span: { r0: number; r1: number; c0: number; c1: number };
  private width: number;
  private height: number;
  private sx: number;
  private sy: number;
  private ratio: number;
  private hatch: CanvasPattern | string;
  private info: HTMLElement;
  private hover: HTMLElement;
  private current: number[] = [];
  private previous: number[] | null = null;

  /** Per dimension, the program's block: [start, stop), unclipped. */
  block(index: number[]): [number, number][] {
    const spans: [number, number][] = [];
    for (let d = 0; d < this.starts.length; d++) {
      const s = at(this.starts[d], index);
      spans.push([s, s + at(this.extents[d], index)]);
    }
    return spans;
  }

  private x(col: number): number {
    return (col - this.span.c0) * this.sx;
  }

  private y(row: number): number {
    return this.rows === null
      ? row * this.height
      : (row - this.span.r0) * this.sy;
  }

  /** The shaded cells of one cut (drawn once per cut, then copied). */
  private base(key: string, cut: { [dim: number]: number }): HTMLCanvasElement {
    const found = this.bases.get(key);
    if (found) {
      return found;
    }
    const off = document.createElement('canvas');
    off.width = this.canvas.width;
    off.height = this.canvas.height;
    const g = off.getContext('2d');
    if (!g) {
      return off;
    }
    g.fillStyle = '#ffffff';
    g.fillRect(0, 0, off.width, off.height);
    // Cells are painted on whole device pixels: no seams between neighbours.
    const X = (c: number) => Math.round(this.x(c) * this.ratio);
    const Y = (r: number) => Math.round(this.y(r) * this.ratio);
    const rowEdges = this.rows === null ? [0, 1] : this.edges[this.rows];
    const colEdges = this.edges[this.cols];
    const peak = Math.max((this.op.coverage as ICoverage).max, 1);
    const strides = this.counts.strides;
    let offset = 0;
    for (const d of this.sliced) {
      offset += cut[d] * strides[d];
    }
    const rowStride = this.rows === null ? 0 : strides[this.rows];
    const colStride = strides[this.cols];
    const data = this.counts.data;
    for (let i = 0; i + 1 < rowEdges.length; i++) {
      const y0 = Y(rowEdges[i]);
      const y1 = Math.max(Y(rowEdges[i + 1]), y0 + 1);
      let j = 0;
      while (j + 1 < colEdges.length) {
        const count = data[offset + i * rowStride + j * colStride];
        let end = j + 1;
        while (
          end + 1 < colEdges.length &&
          data[offset + i * rowStride + end * colStride] === count
        ) {
          end++;
        }
        g.fillStyle = shade(this.op.role, count, peak);
        g.fillRect(
          X(colEdges[j]),
          y0,
          Math.max(X(colEdges[end]) - X(colEdges[j]), 1),
          y1 - y0
        );
        j = end;
      }
    }
    // Block boundaries, while they stay a few pixels apart.
    g.fillStyle = 'rgba(255,255,255,0.9)';
    const top = Y(rowEdges[0]);
    const bottom = Y(rowEdges[rowEdges.length - 1]);
    const left = X(colEdges[0]);
    const right = X(colEdges[colEdges.length - 1]);
    if (this.width / colEdges.length >= 4) {
      for (let k = 1; k + 1 < colEdges.length; k++) {
        g.fillRect(X(colEdges[k]), top, 1, bottom - top);
      }
    }
    if (this.rows !== null && this.height / rowEdges.length >= 4) {
      for (let k = 1; k + 1 < rowEdges.length; k++) {
        g.fillRect(left, Y(rowEdges[k]), right - left, 1);
      }
    }
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    g.strokeStyle = TILE_COLOURS.border;
    g.lineWidth = this.ratio;
    g.strokeRect(
      X(0) + 0.5,
      Y(0) + 0.5,
      X(this.op.shape[this.cols]) - X(0) - 1,
      Y(nRows) - Y(0) - 1
    );
    if (this.bases.size > 16) {
      this.bases.clear();
    }
    this.bases.set(key, off);
    return off;
  }

  /** Draws the operand with `index`'s block lit; `previous` (while playing) dashed. */
  draw(index: number[], previous: number[] | null): boolean {
    this.current = index;
    this.previous = previous;
    return this.redraw();
  }

  /** Draws again (a slice moved); returns whether a block is lit. */
  redraw(): boolean {
    const spans = this.block(this.current);
    const cut: { [dim: number]: number } = {};
    for (const d of this.sliced) {
      const n = this.op.shape[d];
      const where = this.follow
        ? Math.min(Math.max(spans[d][0], 0), n - 1)
        : this.slice[d];
      this.slice[d] = where;
      cut[d] = search(this.edges[d], where);
      const label = this.el.querySelector(
        `[data-role="slice-value"][data-dim="${d}"]`
      );
      if (label) {
        label.textContent = String(where);
      }
      const input = this.el.querySelector(
        `input[data-role="slice"][data-dim="${d}"]`
      ) as HTMLInputElement | null;
      if (input) {
        input.value = String(where);
      }
    }
    const lit = this.sliced.every(
      d => spans[d][0] <= this.slice[d] && this.slice[d] < spans[d][1]
    );
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    const nCols = this.op.shape[this.cols];
    const [r0, r1] = this.rows === null ? [0, 1] : spans[this.rows];
    const [c0, c1] = spans[this.cols];
    const inside = [
      Math.max(r0, 0),
      Math.min(r1, nRows),
      Math.max(c0, 0),
      Math.min(c1, nCols)
    ];
    const hasInside = inside[1] > inside[0] && inside[3] > inside[2];
    this.paint(this.sliced.map(d => cut[d]).join(','), cut, spans, lit, inside);
    const ranges = spans.map(
      ([a, b], d) =>
        `${Math.min(Math.max(a, 0), this.op.shape[d])}:${Math.min(Math.max(b, 0), this.op.shape[d])}`
    );
    this.canvas.dataset.block = lit ? ranges.join(',') : '';
    this.canvas.dataset.lit = lit && hasInside ? 'true' : 'false';
    const pad = spans.map(([a, b], d) => [
      Math.max(0, Math.min(b, 0) - a),
      Math.max(0, b - Math.max(a, this.op.shape[d]))
    ]);
    const padText = pad.some(([x, y]) => x || y)
      ? ` \u00b7 padding ${pad.map(([x, y]) => `${x}+${y}`).join(', ')} (before+after)`
      : '';
    let reuse = '';
    if (this.previous) {
      const same =
        JSON.stringify(this.block(this.previous)) === JSON.stringify(spans);
      reuse =
        this.kernel.schedule === 'gpu'
          ? ' \u00b7 this program loads its own block'
          : same
            ? ' \u00b7 same block as the previous program: no copy'
            : ` \u00b7 a new block: copied ${this.op.role === 'out' ? 'out when done' : 'in'}`;
    }
    this.info.textContent = `[${ranges.join(', ')}]${padText}${reuse}`;
    return lit && hasInside;
  }

  private paint(
    key: string,
    cut: { [dim: number]: number },
    spans: [number, number][],
    lit: boolean,
    inside: number[]
  ): void {
    const g = this.canvas.getContext('2d');
    if (!g) {
      return;
    }
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.drawImage(this.base(key, cut), 0, 0);
    g.scale(this.ratio, this.ratio);
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    const nCols = this.op.shape[this.cols];
    const [r0, r1] = this.rows === null ? [0, 1] : spans[this.rows];
    const [c0, c1] = spans[this.cols];
    const box = (a: number, b: number, c: number, d: number) =>
      [
        this.x(c) + 0.5,
        this.y(a) + 0.5,
        this.x(d) - this.x(c) - 1,
        this.y(b) - this.y(a) - 1
      ] as const;
    if (this.previous && lit) {
      const p = this.block(this.previous);
      const [pr0, pr1] = this.rows === null ? [0, 1] : p[this.rows];
      const [pc0, pc1] = p[this.cols];
      g.setLineDash([4, 3]);
      g.strokeStyle = '#24292f';
      g.lineWidth = 1;
      g.strokeRect(...box(pr0, pr1, pc0, pc1));
      g.setLineDash([]);
    }
    if (lit && (r0 < 0 || r1 > nRows || c0 < 0 || c1 > nCols)) {
      // The part of the block hanging over the array: padding, hatched.
      g.save();
      g.beginPath();
      g.rect(
        this.x(c0),
        this.y(r0),
        this.x(c1) - this.x(c0),
        this.y(r1) - this.y(r0)
      );
      g.rect(
        this.x(inside[2]),
        this.y(inside[0]),
        this.x(inside[3]) - this.x(inside[2]),
        this.y(inside[1]) - this.y(inside[0])
      );
      g.fillStyle = this.hatch;
      g.fill('evenodd');
      g.setLineDash([3, 2]);
      g.strokeStyle = TILE_COLOURS.padding;
      g.strokeRect(...box(r0, r1, c0, c1));
      g.restore();
    }
    if (lit && inside[1] > inside[0] && inside[3] > inside[2]) {
      const x0 = this.x(inside[2]);
      const y0 = this.y(inside[0]);
      const w = Math.max(this.x(inside[3]) - x0, 3);
      const hgt = Math.max(this.y(inside[1]) - y0, 3);
      if (w < 8 || hgt < 8) {
        // A block of a few pixels: cross-hairs lead the eye to it.
        g.strokeStyle = 'rgba(191, 135, 0, 0.9)';
        g.lineWidth = 1;
        g.beginPath();
        g.moveTo(x0 + w / 2, 0);
        g.lineTo(x0 + w / 2, this.height);
        if (this.rows !== null) {
          g.moveTo(0, y0 + hgt / 2);
          g.lineTo(this.width, y0 + hgt / 2);
        }
        g.stroke();
      }
      g.globalAlpha = 0.75;
      g.fillStyle = TILE_COLOURS.highlight;
      g.fillRect(x0, y0, w, hgt);
      g.globalAlpha = 1;
      g.strokeStyle = TILE_COLOURS.outline;
      g.lineWidth = w < 8 || hgt < 8 ? 1 : 2;
      g.strokeRect(x0 + 0.5, y0 + 0.5, w - 1, hgt - 1);
    }
  }

  private onHover(event: MouseEvent): void {
    const rect = this.canvas.getBoundingClientRect();
    const col = Math.floor(
      (event.clientX - rect.left) / this.sx + this.span.c0
    );
    const row =
      this.rows === null
        ? 0
        : Math.floor((event.clientY - rect.top) / this.sy + this.span.r0);
    const nRows = this.rows === null ? 1 : this.op.shape[this.rows];
    if (col < 0 || row < 0 || col >= this.op.shape[this.cols] || row >= nRows) {
      this.hover.textContent = 'outside the array';
      return;
    }
    let k = 0;
    for (const d of this.sliced) {
      k += search(this.edges[d], this.slice[d]) * this.counts.strides[d];
    }
    if (this.rows !== null) {
      k += search(this.edges[this.rows], row) * this.counts.strides[this.rows];
    }
    k += search(this.edges[this.cols], col) * this.counts.strides[this.cols];
    const where = this.rows === null ? `[${col}]` : `[${row}, ${col}]`;
    const count = this.counts.data[k];
    this.hover.textContent =
      `element ${where}: ${this.op.role === 'out' ? 'written by ' : 'read by '}` +
      `${count} program${count === 1 ? '' : 's'}`;
  }
}
