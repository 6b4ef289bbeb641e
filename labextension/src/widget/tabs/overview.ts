/** Kernels tab: grid, operands with their BlockSpecs, compiler params, races, hints. */

import type {
  IFitModel,
  IHintsModel,
  IKernelModel,
  IOverviewPane
} from '../../contracts';
import { ITabContext, ITabRenderer, isError } from '../context';
import { clear, h, table } from '../dom';

/** A kernel's performance hints, each with its line and the chip it assumes. */
export function hintList(hints: IHintsModel): HTMLUListElement {
  const list = h('ul', { class: 'pl-hints' });
  for (const hint of hints.hints) {
    const where = hint.location
      ? `${hint.location.label} line ${hint.location.line}: `
      : '';
    list.append(
      h(
        'li',
        {
          class: `pl-hint pl-hint-${hint.severity}`,
          dataset: { hint: hint.id },
          title: hint.figures
            .map(([name, value]) => `${name} ${value}`)
            .join(' \u00b7 ')
        },
        h('span', { class: 'pl-hint-severity', text: hint.severity }),
        ` ${where}${hint.message} `,
        // A failed check assumes no chip.
        hint.chip
          ? h('span', { class: 'pl-facts', text: `(assumes ${hint.chip})` })
          : null
      )
    );
  }
  if (hints.error) {
    list.append(h('li', { class: 'pl-notice', text: hints.error }));
  }
  return list;
}

/**
 * The hints section of a kernel: drawn at once, then completed with the masked
 * lanes (which need the body interpreted for a few programs) asked of Python.
 */
export function hintSection(
  kernel: IKernelModel,
  ctx: ITabContext | null
): HTMLElement {
  const section = h('div', {
    class: 'pl-hints-section',
    dataset: { hints: kernel.index }
  });
  const draw = (hints: IHintsModel) => {
    clear(section);
    if (!(hints.hints.length || hints.error)) {
      if (hints.masks) {
        section.append(
          h('p', { class: 'pl-facts pl-clean', text: 'Hints: none.' })
        );
      }
      return;
    }
    section.append(h('h5', { text: 'Hints' }), hintList(hints));
  };
  draw(kernel.hints);
  if (!kernel.hints.masks && ctx) {
    void ctx.request({ kind: 'hints', kernel: kernel.index }).then(reply => {
      if (!isError(reply) && 'hints' in reply) {
        draw(reply);
      }
    });
  }
  return section;
}

/** The fit table's rows: chip, memory needed (and where from), limit, verdict. */
export function fitTable(fit: IFitModel): HTMLTableElement {
  return table(
    ['chip', 'memory', 'needed', 'limit', 'verdict', 'vmem_limit_bytes'],
    fit.rows.map(row => [
      row.chip,
      row.memory,
      h(
        'span',
        {
          class: `pl-fit-from pl-fit-${row.neededFrom.replace(/[^a-z]+/g, '-')}`,
          title: row.neededFrom
        },
        row.needed || '?',
        row.neededFrom && row.neededFrom !== 'read'
          ? ` (${row.neededFrom})`
          : ''
      ),
      h('span', {
        title: row.limitFrom,
        text: `${row.limit} of ${row.capacity}`
      }),
      h('span', {
        class: `pl-fit-verdict pl-fit-${row.verdict}`,
        title: row.message,
        text:
          row.verdict === 'fits-with-limit' ? 'needs a limit' : row.verdictText
      }),
      row.vmemLimitBytes === null ? '' : row.vmemLimitBytes.toLocaleString('en')
    ])
  );
}

/**
 * Memory per chip: drawn at once from compiles already made and estimates; a
 * button compiles the kernel for every chip (in parallel, in worker processes).
 */
export function fitSection(
  kernel: IKernelModel,
  ctx: ITabContext | null
): HTMLElement {
  const section = h('div', {
    class: 'pl-fit-section',
    dataset: { fit: kernel.index }
  });
  const draw = (fit: IFitModel) => {
    clear(section);
    if (!fit.rows.length && !fit.error) {
      return;
    }
    section.append(h('h5', { text: 'Memory per chip' }));
    if (fit.rows.length) {
      section.append(fitTable(fit));
    }
    if (fit.error) {
      section.append(h('p', { class: 'pl-notice', text: fit.error }));
    }
    if (!fit.compiled && ctx) {
      const button = h('button', {
        class: 'pl-button pl-fit-compile',
        text: 'compile for every chip',
        title:
          'libtpu for v4 ... 7x, XLA for A100 ... B200: the figures they allocate'
      });
      button.addEventListener('click', () => {
        button.disabled = true;
        button.textContent = 'compiling\u2026';
        void ctx.request({ kind: 'fit', kernel: kernel.index }).then(reply => {
          if (typeof reply === 'object' && reply !== null && 'rows' in reply) {
            draw(reply);
          } else {
            button.textContent = isError(reply) ? reply.error : 'failed';
          }
        });
      });
      section.append(
        h(
          'p',
          { class: 'pl-facts' },
          'Estimated from the BlockSpecs where no compile was made. ',
          button
        )
      );
    }
  };
  draw(kernel.fit);
  return section;
}

function kernelSection(k: IKernelModel, ctx: ITabContext): HTMLElement {
  const section = h(
    'section',
    { class: 'pl-kernel', dataset: { kernel: k.index } },
    h('h4', { text: k.name }),
    h('p', { class: 'pl-facts', text: k.facts.join(' \u00b7 ') }),
    table(
      ['role', 'ref', 'array', 'block', 'index map', 'memory', 'block bytes'],
      k.operands.map(o => [
        h('span', { class: `pl-role pl-role-${o.role}`, text: o.role }),
        o.label,
        o.type,
        o.block,
        h('code', { text: o.indexMap }),
        o.memory + (o.buffers ? ` \u00d7${o.buffers}` : ''),
        o.blockBytes
      ])
    )
  );
  for (const line of k.details) {
    section.append(h('p', { class: 'pl-facts', text: line }));
  }
  // Races under each backend's rules, in words (the conflicts are data too).
  for (const [backend, entry] of Object.entries(k.races)) {
    for (const sentence of entry.sentences) {
      section.append(
        h('p', {
          class: entry.total
            ? 'pl-warning'
            : entry.checked
              ? 'pl-facts pl-clean'
              : 'pl-facts',
          dataset: { races: backend },
          text: sentence
        })
      );
    }
  }
  section.append(fitSection(k, ctx));
  section.append(hintSection(k, ctx));
  return section;
}

export const OVERVIEW: ITabRenderer<IOverviewPane> = {
  render(root, data, ctx) {
    const program = data.program;
    if (program.args.length || program.outputs.length) {
      const args = program.args.map(a => `${a.path}: ${a.type}`).join(', ');
      const outputs = program.outputs.map(o => o.type).join(', ');
      root.append(
        h(
          'p',
          { class: 'pl-program' },
          h('b', { text: program.name }),
          `(${args}) \u2192 ${outputs}`
        )
      );
    }
    if (!data.kernels.length) {
      root.append(h('p', { text: 'No Pallas kernels found.' }));
    }
    for (const k of data.kernels) {
      root.append(kernelSection(k, ctx));
    }
    for (const notice of data.notices) {
      root.append(h('p', { class: 'pl-notice', text: notice }));
    }
  }
};
