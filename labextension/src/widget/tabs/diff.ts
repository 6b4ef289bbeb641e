/**
 * Diff tab: two inspections side by side (`pallaslab.diff`, `%%kernel --diff`).
 * The summary line first (green for a fix, red for a regression); then the
 * figures by group (a changed check first; what changed, resources, figures of
 * merit, check, timing), each change coloured better or worse; then
 * each IR with a's and b's lines in aligned columns, changed lines marked, each
 * line's source lines on both sides (hover one to read it).
 */

import type {
  IDiffFigure,
  IDiffGroup,
  IDiffIr,
  IDiffPane,
  IDiffRow,
  IDiffSource
} from '../../contracts';
import { ITabRenderer } from '../context';
import { append, h, plural } from '../dom';
import { highlightedLine } from '../highlight';

function figureRow(figure: IDiffFigure): HTMLElement {
  return h(
    'tr',
    { class: 'pl-diff-figure' + (figure.changed ? '' : ' pl-diff-same') },
    h('td', { text: figure.name }),
    h('td', { text: figure.a }),
    h('td', { text: figure.b }),
    h(
      'td',
      {},
      figure.verdict
        ? h('span', { class: `pl-diff-${figure.verdict}`, text: figure.change })
        : figure.change,
      figure.note
        ? h('span', { class: 'pl-aside', text: `(${figure.note})` })
        : null
    )
  );
}

function group(found: IDiffGroup): HTMLElement {
  const unchanged = found.unchanged
    ? h('p', {
        class: 'pl-facts',
        text: found.figures.length
          ? `and ${found.unchanged} unchanged`
          : `${found.unchanged} unchanged`
      })
    : null;
  return h(
    'div',
    { class: 'pl-diff-group', dataset: { group: found.id } },
    h('h5', { class: 'pl-diff-group-title', text: found.title }),
    found.figures.length
      ? h(
          'table',
          { class: 'pl-table pl-diff-figures' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ...['figure', 'a', 'b', 'change'].map(x => h('th', { text: x }))
            )
          ),
          h('tbody', {}, ...found.figures.map(figureRow))
        )
      : null,
    unchanged
  );
}

function sources(found: IDiffSource[]): HTMLElement {
  return h(
    'td',
    { class: 'pl-diff-src' },
    ...found.map((source, k) => [
      k ? ', ' : '',
      h('span', {
        class: 'pl-diff-source',
        text: `${source.label}:${source.line}`,
        title: source.text || undefined
      })
    ])
  );
}

function code(text: string, language: string, tint: string): HTMLElement {
  return h(
    'td',
    { class: `pl-diff-code${tint ? ` ${tint}` : ''}` },
    text ? highlightedLine(text, language) : ''
  );
}

function row(found: IDiffRow, language: string): HTMLElement {
  if (found.op === 'gap') {
    return h(
      'tr',
      { class: 'pl-diff-gap' },
      h('td', {
        colspan: '6',
        text: `\u2026 ${plural(found.hidden, 'equal line')}`
      })
    );
  }
  const old = found.op === 'delete' || found.op === 'replace';
  const fresh = found.op === 'insert' || found.op === 'replace';
  return h(
    'tr',
    { class: `pl-diff-row pl-diff-${found.op}`, dataset: { op: found.op } },
    h('td', { class: 'pl-ln', text: found.aLine ?? '' }),
    sources(found.aSources),
    code(found.aText, language, old ? 'pl-diff-old' : ''),
    h('td', { class: 'pl-ln pl-diff-b', text: found.bLine ?? '' }),
    sources(found.bSources),
    code(found.bText, language, fresh ? 'pl-diff-new' : '')
  );
}

function ir(found: IDiffIr, wrap: () => boolean): HTMLElement {
  const title = h('summary', {
    class: 'pl-diff-ir-title',
    text: found.description
  });
  const section = h('details', { class: 'pl-diff-ir' }, title);
  if (found.aError || found.bError || !found.rows.length) {
    return section;
  }
  section.open = true;
  const table = h(
    'table',
    { class: 'pl-diff-lines' + (wrap() ? ' pl-wrap' : '') },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...['a', 'source', found.aTarget, 'b', 'source', found.bTarget].map(x =>
          h('th', { text: x })
        )
      )
    ),
    h('tbody', {}, ...found.rows.map(r => row(r, found.language)))
  );
  append(section, [
    h('div', { class: 'pl-diff-scroll' }, table),
    found.more
      ? h('p', {
          class: 'pl-notice',
          text: `\u2026 ${plural(found.more, 'more changed line')}: diff.to_frame('lines') has every row`
        })
      : null
  ]);
  return section;
}

export const DIFF: ITabRenderer<IDiffPane> = {
  render(root, data, ctx) {
    const kernel =
      data.aKernel === data.bKernel
        ? data.aKernel
        : `${data.aKernel} \u2192 ${data.bKernel}`;
    const wrap = (): boolean => ctx.state.diffWrap !== false;
    const toggle = h('input', { type: 'checkbox', class: 'pl-wrap-toggle' });
    toggle.checked = wrap();
    toggle.addEventListener('change', () => {
      ctx.state.diffWrap = toggle.checked;
      for (const table of Array.from(root.querySelectorAll('.pl-diff-lines'))) {
        table.classList.toggle('pl-wrap', toggle.checked);
      }
    });
    append(root, [
      h('p', {
        class:
          'pl-diff-summary' + (data.verdict ? ` pl-diff-${data.verdict}` : ''),
        text: data.summary
      }),
      h('p', {
        class: 'pl-facts',
        text: `a: ${data.aName} \u00b7 b: ${data.bName} \u00b7 kernel ${kernel} \u00b7 figures for ${data.chip}`
      }),
      ...data.groups.filter(g => g.figures.length || g.unchanged).map(group),
      data.irs.length
        ? h(
            'div',
            { class: 'pl-toolbar' },
            h('label', {}, toggle, ' wrap long lines'),
            h('span', {
              class: 'pl-aside',
              text: 'hover a source link to read the line'
            })
          )
        : null,
      ...data.irs.map(found => ir(found, wrap)),
      ...data.notes.map(note =>
        h('p', { class: 'pl-notice', text: `Note: ${note}` })
      )
    ]);
  }
};
