/** Which blocks of an output differ from the reference: a heatmap in SVG elements. */

import type { IHeatmapModel } from '../../contracts';
import { h, svg } from '../dom';

function tileColour(count: number, nonfinite: number, perTile: number): string {
  if (nonfinite) {
    return '#8250df';
  }
  if (!count) {
    return '#eef6ee';
  }
  const light = Math.round(200 - 150 * Math.min(1, count / perTile));
  return `rgb(230,${light},${light})`;
}

/** What one cell of the heatmap holds, in words. */
export function cellTitle(
  t: IHeatmapModel,
  r: number,
  c: number,
  count: number,
  nonfinite: number
): string {
  const pooled = t.pool[0] > 1 || t.pool[1] > 1;
  let where: string;
  if (pooled) {
    where = `cell (${r}, ${c})`;
  } else if (t.tiles.length === 1) {
    where = `block ${c}`;
  } else if (t.tiles.length === 2) {
    where = `block (${r}, ${c})`;
  } else {
    where = `row ${r}, block ${c}`;
  }
  let text = `${where}: ${count} of ${t.perTile} elements differ`;
  if (nonfinite) {
    text += `, ${nonfinite} NaN/Inf`;
  }
  return text;
}

/** The heatmap with its description, axes and legend. */
export function renderHeatmap(t: IHeatmapModel): HTMLElement {
  const rows = t.counts.length;
  const cols = rows ? t.counts[0].length : 0;
  const cell = Math.max(
    6,
    Math.min(
      28,
      Math.floor(560 / Math.max(cols, 1)),
      Math.floor(280 / Math.max(rows, 1))
    )
  );
  const picture = svg('svg', {
    width: cols * cell + 2,
    height: rows * cell + 2,
    class: 'pl-heatmap',
    role: 'img',
    'aria-label': t.description
  });
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const count = t.counts[r][c];
      const bad = t.nonfinite[r][c];
      picture.append(
        svg(
          'rect',
          {
            x: c * cell + 1,
            y: r * cell + 1,
            width: cell - 1,
            height: cell - 1,
            fill: tileColour(count, bad, t.perTile),
            stroke: '#d1d9e0',
            'data-row': r,
            'data-col': c,
            'data-count': count
          },
          svg('title', {}, cellTitle(t, r, c, count, bad))
        )
      );
    }
  }
  const axes = [
    t.rowLabel ? `rows: ${t.rowLabel}` : '',
    t.colLabel ? `columns: ${t.colLabel}` : ''
  ]
    .filter(Boolean)
    .join(' \u00b7 ');
  const programs = t.badProgramCount
    ? 'programs writing them: ' +
      t.badPrograms.map(p => `(${p.join(', ')})`).join(' ') +
      (t.badProgramCount > t.badPrograms.length ? ' \u2026' : '')
    : '';
  return h(
    'div',
    { class: 'pl-tiles' },
    h('p', { text: t.description }),
    picture,
    h('div', {
      class: 'pl-facts',
      text: [axes, programs].filter(Boolean).join(' \u00b7 ')
    }),
    h('div', {
      class: 'pl-facts',
      text: 'red: elements outside tolerance (darker = more of the block); purple: NaN/Inf where the reference is finite; green: block matches'
    }),
    t.note ? h('p', { class: 'pl-notice', text: t.note }) : null
  );
}
