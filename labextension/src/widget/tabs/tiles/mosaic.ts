/**
 * The Tiles tab's Mosaic GPU part: shared memory per chip, pipelines (steps, slots,
 * BlockSpec windows with their transforms), copies between GMEM and the chip, matrix
 * products, work. Each empty part says why in one sentence.
 *
 * Stable hooks for browser tests: the part has data-role="mosaic"; the SMEM total
 * data-role="smem-total" (data-bytes), each chip's row data-chip and data-fits; each
 * pipeline data-role="pipeline" with data-steps and data-slots; each copy row
 * data-role="copy".
 */

import type { IMosaicGpuModel, ISmemChip } from '../../../contracts';
import { h, table } from '../../dom';

function percent(share: number): string {
  return share > 0 && share < 0.001
    ? '<0.1%'
    : `${Math.round(share * 1000) / 10}%`;
}

function missing(text: string): HTMLElement | null {
  return text ? h('p', { class: 'pl-notice', text }) : null;
}

function chipRow(chip: ISmemChip, total: string): HTMLElement {
  const verdict = chip.fits
    ? `${total} = ${percent(chip.share)} of ${chip.limitText}; ` +
      `${chip.blocksPerSm} CTA${chip.blocksPerSm === 1 ? '' : 's'} per SM by SMEM`
    : `${total} is over the ${chip.limitText} one block may use: it does not fit`;
  return h(
    'li',
    {
      class: chip.fits ? '' : 'pl-problem',
      dataset: { chip: chip.chip, fits: String(chip.fits) }
    },
    h('b', { text: chip.chip }),
    `: ${verdict}`,
    chip.note ? h('span', { class: 'pl-notice', text: ` ${chip.note}` }) : null
  );
}

/** The Mosaic GPU part of a kernel's Tiles tab. */
export function mosaicPart(model: IMosaicGpuModel): HTMLElement {
  const smem = model.smem;
  const grid =
    `${model.grid.join(' \u00d7 ')} = ${model.ctas} CTA${model.ctas === 1 ? '' : 's'}` +
    (model.axisNames.length ? ` (${model.axisNames.join(', ')})` : '') +
    (model.threads > 1 ? `, ${model.threads} warpgroups each` : '');
  const work =
    `work ${model.work.flopsText} (matrix products ${model.work.mmaFlopsText}), ` +
    `${model.work.bytesText} between GMEM and the chip` +
    (model.work.exact ? '' : ' (estimate: see the notes)');
  const smemRows = smem.rows.map(r => [
    `${'\u2003'.repeat(r.depth)}${r.label}`,
    r.kind,
    r.stored ? `${r.shape} \u2192 stored ${r.stored}` : r.shape,
    r.transforms,
    r.bytesText,
    r.atPeak ? 'yes' : 'no',
    r.line
  ]);
  const pipelines = model.pipelines.map(p =>
    h(
      'div',
      {
        class: 'pl-mosaic-pipeline',
        dataset: {
          role: 'pipeline',
          steps: p.steps,
          slots: p.slots,
          index: p.index
        }
      },
      h('p', {
        text:
          `${p.kind}${p.line ? ` at ${p.line}` : ''}: ${p.steps} step${p.steps === 1 ? '' : 's'} ` +
          `per run, ${p.slots} slot${p.slots === 1 ? '' : 's'} per operand ` +
          `(max_concurrent_steps), ${p.runs} run${p.runs === 1 ? '' : 's'} per CTA`
      }),
      table(
        ['operand', 'window per step', 'transforms', 'SMEM (all slots)'],
        p.buffers.map(b => [b.operand, b.window, b.transforms, b.bytesText])
      )
    )
  );
  const copyTable = table(
    [
      'copy',
      'GMEM operand',
      'SMEM buffer',
      'window',
      'bytes each',
      'copies',
      'GMEM bytes',
      'line'
    ],
    model.copies.map(c => [
      c.kind,
      c.operand,
      c.smem,
      c.window,
      c.bytesEachText,
      String(c.copies) + (c.exact ? '' : ' (at most)'),
      c.totalText + (c.multicast > 1 ? ` (multicast to ${c.multicast})` : ''),
      c.line
    ])
  );
  copyTable
    .querySelectorAll('tbody tr')
    .forEach(row => ((row as HTMLElement).dataset.role = 'copy'));
  return h(
    'div',
    { class: 'pl-mosaic', dataset: { role: 'mosaic' } },
    h('p', { class: 'pl-facts', text: `grid ${grid} \u00b7 ${work}` }),
    model.persistent ? h('p', { text: model.persistent }) : null,
    model.copyMap
      ? h('p', {
          class: 'pl-notice',
          text:
            'The operands above are cut into the windows the kernel copies: ' +
            `program (\u2026, s) is a CTA's step s (at most ${model.steps} per CTA).`
        })
      : null,
    h('h4', { text: 'Shared memory' }),
    h('p', {
      dataset: { role: 'smem-total', bytes: smem.total },
      text: smem.summary
    }),
    h(
      'ul',
      { class: 'pl-mosaic-chips' },
      ...smem.chips.map(c => chipRow(c, smem.totalText))
    ),
    table(
      [
        'allocation',
        'kind',
        'shape',
        'transforms',
        'SMEM',
        'live at the peak',
        'line'
      ],
      smemRows
    ),
    h('h4', { text: 'Pipelines' }),
    ...pipelines,
    missing(model.pipelinesMissing),
    h('h4', { text: 'Copies between GMEM and the chip' }),
    model.copies.length ? copyTable : null,
    missing(model.copiesMissing),
    h('h4', { text: 'Matrix products' }),
    model.mmas.length
      ? table(
          [
            'product',
            'm \u00d7 n \u00d7 k',
            'dtypes',
            'A in',
            'layout',
            'runs',
            'FLOPs',
            'line'
          ],
          model.mmas.map(m => [
            m.kind,
            m.shape,
            m.dtypes,
            m.lhs,
            m.layout,
            String(m.count) + (m.exact ? '' : ' (at most)'),
            m.flopsText,
            m.line
          ])
        )
      : null,
    missing(model.mmasMissing),
    ...model.notices.map(n => h('p', { class: 'pl-notice', text: n }))
  );
}
