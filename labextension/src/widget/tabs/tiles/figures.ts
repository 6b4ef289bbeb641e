/** The Tiles tab's figures of merit: traffic, working set, the roofline on a chip. */

import type { ITilesKernel } from '../../../contracts';
import { clear, h, table } from '../../dom';

/** What the figures show: the schedule and the chip picked per schedule. */
export interface IFiguresView {
  schedule: 'tpu' | 'gpu';
  chip: { tpu: string; gpu: string };
}

/** The figures, redrawn by the returned function when the schedule changes. */
export function figures(
  kernel: ITilesKernel,
  view: IFiguresView
): { el: HTMLElement; redraw: () => void } {
  const box = h('div', { class: 'pl-tiles-figures' });
  const draw = () => {
    clear(box);
    const merit = kernel.merit[view.schedule];
    const rows: (Node | string)[][] = merit.operands
      .filter(o => o.access === 'pipelined' || o.access === 'prefetch')
      .map(o => [
        h('span', { class: `pl-role pl-role-${o.role}`, text: o.role }),
        o.label,
        o.reads.join(' / '),
        String(o.transfers),
        o.bytesText,
        o.minBytesText,
        `${o.ratio}\u00d7`,
        `${o.blockText} \u00d7${o.buffers}`
      ]);
    rows.push([
      h('b', { text: 'all' }),
      '',
      '',
      '',
      merit.bytesText,
      merit.minBytesText,
      `${merit.ratio}\u00d7`,
      merit.workingSetText
    ]);
    box.append(
      table(
        [
          'role',
          'operand',
          'reads min / mean / max',
          'copies',
          'HBM bytes',
          'minimum',
          'ratio',
          'VMEM / smem'
        ],
        rows
      )
    );
    const fits = kernel.fits[view.schedule];
    const chosen =
      fits.find(f => f.chip === view.chip[view.schedule]) ?? fits[0];
    const select = h(
      'select',
      {
        dataset: { role: 'chip' },
        onchange: (e: Event) => {
          view.chip[view.schedule] = (e.target as HTMLSelectElement).value;
          draw();
        }
      },
      ...fits.map(f =>
        h('option', {
          value: f.chip,
          text: f.chip,
          selected: f.chip === chosen.chip ? 'selected' : null
        })
      )
    );
    const share =
      chosen.share === null
        ? '?'
        : chosen.share > 0 && chosen.share < 0.001
          ? '<0.1%'
          : `${Math.round(chosen.share * 1000) / 10}%`;
    const holds = merit.workingSetName
      ? `${merit.workingSetName}: ${merit.workingSetText}`
      : `working set per program ${merit.workingSetText} (blocks \u00d7 buffers + scratch)`;
    const facts = [
      `${holds} = ${share} of ${chosen.capacityText} ${chosen.capacityName}` +
        (chosen.fits ? '' : ' \u2014 does not fit'),
      `work ${merit.flopsText}` +
        (merit.flopsSource
          ? ` (${merit.flopsSource}${merit.flopsExact ? '' : ', estimate'})`
          : '')
    ];
    if (merit.intensity !== null) {
      facts.push(
        `arithmetic intensity ${merit.intensity} FLOP/byte vs ridge ${chosen.ridge} ` +
          `(${chosen.peakText} ${chosen.peakName} / ${chosen.bandwidthText})`
      );
      facts.push(
        `${chosen.bound}-bound: at most ${chosen.attainableText}, at least ${chosen.secondsText}`
      );
    }
    box.append(
      h('p', { class: 'pl-tiles-chip' }, 'On ', select, ':'),
      h(
        'ul',
        { class: 'pl-tiles-facts' },
        ...facts.map(f => h('li', { text: f }))
      )
    );
    if (chosen.notes.length) {
      box.append(
        h(
          'ul',
          { class: 'pl-tiles-notes' },
          ...chosen.notes.map(n => h('li', { class: 'pl-notice', text: n }))
        )
      );
    }
    box.dataset.schedule = view.schedule;
    box.dataset.chip = chosen.chip;
  };
  draw();
  return { el: box, redraw: draw };
}
