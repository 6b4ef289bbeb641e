/**
 * "Inside the block": the element-level loads and stores of one program, asked of
 * Python (`views/tabs/tiles.py respond`) and drawn per buffer.
 */

import type { IAccessMapModel, IAccessesReply } from '../../../contracts';
import { clear, h, table } from '../../dom';
import { decode } from './arrays';
import { hatch } from './operand';

const COLOURS = {
  read: '#9ecbff',
  readTwice: '#0550ae',
  write: '#fb8f44',
  writeTwice: '#bc4c00',
  both: '#8250df',
  untouched: '#eaeef2',
  masked: '#8c959f',
  outside: '#cf222e'
};

interface IOverlay {
  canvas: HTMLCanvasElement;
  cell: number;
  cellH: number;
  ref: IAccessMapModel;
  saved?: ImageData;
}

function accessCanvas(ref: IAccessMapModel): IOverlay {
  const reads = decode(ref.reads);
  const writes = decode(ref.writes);
  const masked = decode(ref.masked);
  const inside = decode(ref.inside);
  const [rows, cols] = reads.shape;
  const fit = Math.max(
    1,
    Math.min(24, Math.floor(360 / cols), Math.floor(240 / rows))
  );
  // A strip (one row) stays tall enough to see; a 2-D buffer keeps square elements.
  const cell = fit;
  const cellH = rows === 1 ? Math.max(fit, 16) : fit;
  const canvas = h('canvas', {
    class: 'pl-tiles-canvas',
    width: cols * cell,
    height: rows * cellH,
    dataset: { ref: ref.label }
  });
  const g = canvas.getContext('2d');
  if (!g) {
    return { canvas, cell, cellH, ref };
  }
  const lanes = hatch(g, COLOURS.masked);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const k = i * cols + j;
      const r = reads.data[k];
      const w = writes.data[k];
      const m = masked.data[k];
      let colour: string | CanvasPattern | null;
      if (!(inside.data[k] > 0)) {
        colour = r || w ? COLOURS.outside : m ? lanes : null;
      } else if (r && w) {
        colour = COLOURS.both;
      } else if (r) {
        colour = r >= 2 ? COLOURS.readTwice : COLOURS.read;
      } else if (w) {
        colour = w >= 2 ? COLOURS.writeTwice : COLOURS.write;
      } else {
        colour = m ? COLOURS.masked : COLOURS.untouched;
      }
      if (colour !== null) {
        g.fillStyle = colour;
        g.fillRect(j * cell, i * cellH, cell, cellH);
      }
    }
  }
  // The block's outline, when lanes reached beyond it (1-D and 2-D buffers).
  const o = ref.origin;
  const s = ref.shape;
  if (s.length && s.length <= 2 && Array.from(inside.data).some(v => v === 0)) {
    const r0 = s.length === 2 ? -o[0] : 0;
    const c0 = -o[s.length - 1];
    const hgt = s.length === 2 ? s[0] : 1;
    const wid = s[s.length - 1];
    g.strokeStyle = '#24292f';
    g.setLineDash([3, 2]);
    g.strokeRect(
      (c0 * cell) / ref.pool[1] + 0.5,
      (r0 * cellH) / ref.pool[0] + 0.5,
      (wid * cell) / ref.pool[1] - 1,
      (hgt * cellH) / ref.pool[0] - 1
    );
  }
  return { canvas, cell, cellH, ref };
}

/** Draws a reply (or its error) into `root`, whose data-status says which. */
export function drawAccesses(
  data: IAccessesReply | { error: string },
  root: HTMLElement
): void {
  clear(root);
  if ('error' in data) {
    root.dataset.status = 'error';
    root.append(h('p', { class: 'pl-problem', text: data.error }));
    return;
  }
  root.dataset.status = 'ready';
  root.dataset.program = data.program.join(',');
  const legend: [string, string][] = [
    ['read once', COLOURS.read],
    ['read twice or more', COLOURS.readTwice],
    ['written', COLOURS.write],
    ['written twice or more', COLOURS.writeTwice],
    ['read and written', COLOURS.both],
    ['never touched', COLOURS.untouched],
    ['masked-out lane (hatched beyond the block)', COLOURS.masked],
    ['enabled lane outside the block', COLOURS.outside]
  ];
  root.append(
    h(
      'div',
      { class: 'pl-tiles-legend' },
      ...legend.map(([label, colour]) =>
        h(
          'span',
          { class: 'pl-tiles-key' },
          h('span', {
            class: 'pl-tiles-swatch',
            style: `background:${colour}`
          }),
          ` ${label}`
        )
      )
    )
  );
  const overlays: (IOverlay | undefined)[] = [];
  const refs = h('div', { class: 'pl-tiles-operands' });
  data.refs.forEach((ref, k) => {
    const s = ref.summary;
    if (!s.accesses) {
      return;
    }
    const overlay = accessCanvas(ref);
    overlays[k] = overlay;
    const facts = [
      `${s.accesses} access${s.accesses === 1 ? '' : 'es'}`,
      `${s.untouched} of ${s.elements} elements never touched`,
      `${s.readTwice} read twice or more`,
      `${s.maskedLanes} masked-out lanes`,
      `${s.outsideLanes} enabled lanes outside the block`
    ];
    if (s.writtenTwice) {
      facts.push(`${s.writtenTwice} written twice or more`);
    }
    const pooled = ref.pool[0] > 1 || ref.pool[1] > 1;
    refs.append(
      h(
        'div',
        {
          class: 'pl-tiles-operand',
          dataset: { ref: k },
          // As wide as the picture (or a minimum), whichever program's counts it
          // shows: the next program's texts wrap inside rather than move the others.
          style: `width:${Math.max(overlay.canvas.width + 2, 220)}px`
        },
        h(
          'div',
          { class: 'pl-tiles-title' },
          h('span', { class: `pl-role pl-role-${ref.role}`, text: ref.role }),
          ' ',
          h('b', { text: ref.label }),
          ` ${ref.type}` +
            (pooled
              ? ` (drawn ${ref.pool.join('\u00d7')} elements per pixel)`
              : '')
        ),
        overlay.canvas,
        h('div', { class: 'pl-tiles-info', text: facts.join(' \u00b7 ') })
      )
    );
  });
  root.append(refs);
  const rows = data.accesses.map(a => {
    const ref = data.refs[a.ref];
    return [
      a.kind,
      ref ? ref.label : '?',
      a.file ? `${a.file} line ${a.line}` : '',
      a.primitive,
      String(a.lanes),
      String(a.masked),
      String(a.outside),
      a.bbox.map(([x, y]) => `${x}:${y}`).join(', ')
    ];
  });
  const list = table(
    [
      'access',
      'buffer',
      'line',
      'primitive',
      'lanes',
      'masked',
      'outside',
      'elements'
    ],
    rows
  );
  list.querySelectorAll('tbody tr').forEach((tr, i) => {
    const a = data.accesses[i];
    (tr as HTMLElement).dataset.access = String(i);
    tr.addEventListener('mouseenter', () => {
      const o = overlays[a.ref];
      if (!o || o.ref.shape.length > 2) {
        return;
      }
      const g = o.canvas.getContext('2d');
      if (!g) {
        return;
      }
      const origin = o.ref.origin;
      const pool = o.ref.pool;
      const two = a.bbox.length >= 2;
      const [rb, cb] = two
        ? [a.bbox[0], a.bbox[1]]
        : [[0, 1], a.bbox[0] ?? [0, 1]];
      const r0 = two ? rb[0] - origin[0] : 0;
      const r1 = two ? rb[1] - origin[0] : 1;
      const c0 = cb[0] - origin[origin.length - 1];
      const c1 = cb[1] - origin[origin.length - 1];
      o.saved =
        o.saved ?? g.getImageData(0, 0, o.canvas.width, o.canvas.height);
      g.putImageData(o.saved, 0, 0);
      g.strokeStyle = '#111111';
      g.lineWidth = 2;
      g.setLineDash([]);
      g.strokeRect(
        (c0 * o.cell) / pool[1],
        (r0 * o.cellH) / pool[0],
        ((c1 - c0) * o.cell) / pool[1],
        ((r1 - r0) * o.cellH) / pool[0]
      );
    });
    tr.addEventListener('mouseleave', () => {
      const o = overlays[a.ref];
      if (o && o.saved) {
        o.canvas.getContext('2d')?.putImageData(o.saved, 0, 0);
      }
    });
  });
  const count = data.accessCount;
  const listed =
    count > data.accesses.length
      ? ` (the first ${data.accesses.length} listed)`
      : '';
  root.append(
    h(
      'details',
      { class: 'pl-tiles-list' },
      h('summary', { text: `${count} loads and stores, in order${listed}` }),
      list
    )
  );
  for (const n of data.notices) {
    root.append(h('p', { class: 'pl-notice', text: n }));
  }
}
