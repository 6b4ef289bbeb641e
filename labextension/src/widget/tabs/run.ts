/** Run tab: backend, findings, outputs, and the comparison with the reference. */

import type { ILocation, IRunPane } from '../../contracts';
import { ITabRenderer } from '../context';
import { h, table } from '../dom';
import { renderHeatmap } from './heatmap';

function at(where: ILocation | null): string {
  return where ? `${where.label} line ${where.line}: ` : '';
}

function finding(title: string, text: string): HTMLElement {
  return h(
    'p',
    { class: 'pl-warning' },
    h('b', { text: title }),
    ` \u2014 ${text}`
  );
}

export const RUN: ITabRenderer<IRunPane> = {
  render(root, data) {
    const r = data.result;
    if (!r) {
      root.append(h('p', { text: data.message }));
      return;
    }
    root.append(
      h(
        'p',
        {},
        'Ran on ',
        h('b', { text: r.backend }),
        ` (${r.mode}) in ${r.seconds}.`
      )
    );
    if (r.note) {
      root.append(h('p', { class: 'pl-notice', text: r.note }));
    }
    if (r.inputs) {
      root.append(h('p', { class: 'pl-facts', text: r.inputs }));
    }
    for (const line of r.notices) {
      root.append(h('p', { class: 'pl-facts', text: line }));
    }
    for (const leak of r.leaks) {
      root.append(
        finding(leak.title || 'Padding leak', at(leak.where) + leak.text)
      );
    }
    for (const found of r.outOfBounds) {
      root.append(finding('Out of bounds', at(found.where) + found.text));
    }
    for (const check of r.raceChecks) {
      root.append(
        check.confirmed
          ? finding(`Race (${check.backend.toUpperCase()})`, check.text)
          : h('p', { class: 'pl-facts', text: check.text })
      );
    }
    for (const race of r.interpreterRaces) {
      root.append(
        finding('Race (Mosaic GPU interpreter)', at(race.where) + race.text)
      );
    }
    root.append(
      table(
        ['output', 'type', 'values', 'min', 'max', 'NaN', 'Inf'],
        r.outputs.map(o => [
          o.path,
          o.type,
          h('code', { text: o.preview }),
          o.min,
          o.max,
          String(o.nan),
          String(o.inf)
        ])
      )
    );
    const c = r.comparison;
    if (c) {
      root.append(
        h(
          'p',
          { class: `pl-verdict ${c.ok ? 'pl-pass' : 'pl-fail'}` },
          h('b', { text: c.verdict }),
          `: ${c.detail}`
        )
      );
      for (const t of c.tiles) {
        root.append(renderHeatmap(t));
      }
    }
  }
};
