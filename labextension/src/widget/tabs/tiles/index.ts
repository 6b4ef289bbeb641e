/**
 * Tiles tab: every operand cut into blocks, lit program by program; figures of
 * merit; the element-level loads and stores of one program (asked of Python).
 *
 * Stable hooks for browser tests: the kernel's root has data-program ("i,j"),
 * data-position and data-highlighted (operand blocks lit); program cells have
 * data-program; the scrub input, play button, schedule and chip selectors have
 * data-role; every operand canvas has data-operand and data-block (the lit block's
 * ranges, "r0:r1,c0:c1"); the accesses panel has data-role="accesses" and
 * data-status ("idle", "loading", "ready", "error").
 */

import type {
  ITilesKernel,
  ITilesKernelError,
  ITilesPane
} from '../../../contracts';
import { ITabContext, ITabRenderer, isError } from '../../context';
import { append, clear, h } from '../../dom';
import { drawAccesses } from './accesses';
import { programText, unravel } from './arrays';
import { figures, IFiguresView } from './figures';
import { mosaicPart } from './mosaic';
import { TilesOperand } from './operand';

const SPEEDS = [1, 8, 64, 512];

/** What one kernel's drawing keeps across redraws of the pane. */
interface ISaved {
  schedule?: 'tpu' | 'gpu';
  chip?: { tpu: string; gpu: string };
  position?: number;
  speed?: number;
}

interface IView extends IFiguresView {
  position: number;
  hover: number | null;
  timer: ReturnType<typeof setInterval> | null;
  speed: number;
  accessesFor: string | null;
}

/** A kernel's tile map; `stop()` stops it playing. */
export interface ITilesKernelElement extends HTMLElement {
  stop?: () => void;
}

function drawn(kernel: ITilesKernel) {
  return kernel.operands.filter(
    o => o.mapped && (o.access === 'pipelined' || o.access === 'prefetch')
  );
}

/** Why an operand has no blocks to draw. */
function unmappedText(o: ITilesKernel['operands'][number]): string {
  if (o.access === 'scratch') {
    return "scratch, in the kernel's memory only";
  }
  if (o.access === 'manual') {
    return `left in ${o.memory.toUpperCase()}: the body copies what it needs`;
  }
  return o.reason || 'no blocks';
}

export function tilesKernel(
  kernel: ITilesKernel,
  ctx: ITabContext | null,
  saved: ISaved
): ITilesKernelElement {
  // Large grids come sampled: every stride[a]-th program along axis a. Positions and
  // indices below count the programs shown; `actual` gives a program's grid indices.
  const grid = kernel.shown;
  const stride = kernel.stride;
  const sampled = stride.some(s => s > 1);
  const total = kernel.shownPrograms;
  const actual = (index: number[]) => index.map((v, a) => v * stride[a]);
  const view: IView = {
    schedule: saved.schedule ?? kernel.schedule,
    chip: { ...kernel.defaultChip, ...(saved.chip ?? {}) },
    position: Math.min(saved.position ?? 0, total - 1),
    hover: null,
    timer: null,
    speed: saved.speed ?? 1,
    accessesFor: null
  };
  saved.chip = view.chip;
  const root: ITilesKernelElement = h('div', {
    class: 'pl-tiles',
    dataset: { kernel: kernel.index }
  });
  const operands = drawn(kernel).map(o => new TilesOperand(o, kernel));
  const unmapped = kernel.operands.filter(o => !drawn(kernel).includes(o));
  // As wide as its longest text (the last program's), so the controls after it
  // stay put while the label changes.
  const widest = `program ${programText(actual(grid.map(n => n - 1)))} \u00b7 ${total} of ${total}${sampled ? ' shown' : ''}`;
  const label = h('span', {
    class: 'pl-tiles-program',
    dataset: { role: 'program-label' },
    style: `min-width:${widest.length + 1}ch`
  });
  const scrub = h('input', {
    type: 'range',
    min: 0,
    max: Math.max(total - 1, 0),
    value: view.position,
    dataset: { role: 'scrub' },
    oninput: (e: Event) => {
      stop();
      pin(Number((e.target as HTMLInputElement).value));
    }
  });
  const play = h('button', {
    class: 'pl-tiles-play',
    dataset: { role: 'play' },
    text: '\u25b6 play',
    onclick: () => (view.timer ? stop() : start())
  });
  const speed = h(
    'select',
    {
      dataset: { role: 'speed' },
      title: 'programs per step',
      onchange: (e: Event) => {
        view.speed = Number((e.target as HTMLSelectElement).value);
        saved.speed = view.speed;
      }
    },
    ...SPEEDS.map(s =>
      h('option', {
        value: s,
        text: `${s}/step`,
        selected: s === view.speed ? 'selected' : null
      })
    )
  );
  const order = h('p', {
    class: 'pl-notice pl-tiles-order',
    dataset: { role: 'order' }
  });
  const merit = figures(kernel, view);
  const scheduleSelect = h(
    'select',
    {
      dataset: { role: 'schedule' },
      onchange: (e: Event) => {
        view.schedule = (e.target as HTMLSelectElement).value as 'tpu' | 'gpu';
        saved.schedule = view.schedule;
        refresh();
        merit.redraw();
      }
    },
    ...(['tpu', 'gpu'] as const).map(s =>
      h('option', {
        value: s,
        text: s === 'tpu' ? 'TPU order' : 'GPU (parallel)',
        selected: s === view.schedule ? 'selected' : null
      })
    )
  );
  const cells = new Map<number, HTMLElement>();
  let programs: HTMLElement;
  let gridCanvas: HTMLCanvasElement | null = null;
  const cols = grid.length ? grid[grid.length - 1] : 1;
  const rowCount = total / cols;
  if (kernel.table) {
    const names = kernel.axisNames;
    const head = h(
      'tr',
      {},
      h('th', {
        text:
          grid.length > 1
            ? `${names.slice(0, -1).join(', ')} \\ ${names[names.length - 1]}`
            : (names[0] ?? '')
      }),
      ...Array.from({ length: cols }, (_, j) =>
        h('th', { text: grid.length ? String(j) : '()' })
      )
    );
    const body: HTMLElement[] = [];
    for (let r = 0; r < rowCount; r++) {
      const lead = unravel(r, grid.slice(0, -1));
      const tds: HTMLElement[] = [];
      for (let j = 0; j < cols; j++) {
        const position = r * cols + j;
        const index = grid.length ? unravel(position, grid) : [];
        const td = h('td', {
          class: 'pl-tiles-cell',
          title: `program ${programText(index)}`,
          dataset: { program: index.join(','), position },
          onmouseenter: () => {
            if (!view.timer) {
              show(position);
            }
          },
          onclick: () => {
            stop();
            pin(position);
          }
        });
        cells.set(position, td);
        tds.push(td);
      }
      body.push(
        h(
          'tr',
          {},
          h('th', { text: grid.length > 1 ? lead.join(', ') : '' }),
          ...tds
        )
      );
    }
    programs = h(
      'table',
      {
        class: 'pl-tiles-grid',
        dataset: { role: 'programs' },
        onmouseleave: () => {
          if (!view.timer) {
            show(null);
          }
        }
      },
      h('thead', {}, head),
      h('tbody', {}, ...body)
    );
  } else {
    // Too many programs for a table: one pixel (or more) per program on a canvas.
    const w = Math.min(cols, 512);
    const hgt = Math.min(rowCount, 256);
    const canvas = h('canvas', {
      class: 'pl-tiles-canvas pl-tiles-gridmap',
      width: w,
      height: hgt,
      dataset: { role: 'programs' },
      style: `width:${Math.max(w, 256)}px;height:${Math.max(hgt, 64)}px`
    });
    const where = (e: MouseEvent) => {
      const rect = canvas.getBoundingClientRect();
      const j = Math.min(
        cols - 1,
        Math.floor(((e.clientX - rect.left) / rect.width) * cols)
      );
      const r = Math.min(
        rowCount - 1,
        Math.floor(((e.clientY - rect.top) / rect.height) * rowCount)
      );
      return r * cols + j;
    };
    canvas.addEventListener('mousemove', e => {
      if (!view.timer) {
        show(where(e));
      }
    });
    canvas.addEventListener('mouseleave', () => {
      if (!view.timer) {
        show(null);
      }
    });
    canvas.addEventListener('click', e => {
      stop();
      pin(where(e));
    });
    gridCanvas = canvas;
    programs = canvas;
  }
  const accessBox = h('div', {
    class: 'pl-tiles-accesses',
    dataset: { role: 'accesses', status: 'idle' }
  });
  const accessTitle = h('summary', { text: 'Inside the block' });
  const accessPanel = h(
    'details',
    { class: 'pl-tiles-inside', open: 'open' },
    accessTitle,
    accessBox
  );
  accessPanel.addEventListener('toggle', () => {
    if (accessPanel.open) {
      fetchAccesses();
    }
  });
  let accessTimer: ReturnType<typeof setTimeout> | undefined;

  function fetchAccesses() {
    if (!accessPanel.open || view.timer || !ctx || kernel.accessesNote) {
      return;
    }
    const index = actual(grid.length ? unravel(view.position, grid) : []);
    const key = index.join(',');
    accessTitle.textContent = `Inside the block: the loads and stores of program ${programText(index)}`;
    if (view.accessesFor === key) {
      return;
    }
    view.accessesFor = key;
    accessBox.dataset.status = 'loading';
    clear(accessBox);
    accessBox.append(
      h('p', {
        class: 'pl-loading',
        text: `Interpreting program ${programText(index)}\u2026`
      })
    );
    void ctx
      .request({ kind: 'accesses', kernel: kernel.index, program: index })
      .then(reply => {
        if (view.accessesFor !== key) {
          return;
        }
        drawAccesses(
          isError(reply) || 'refs' in reply ? reply : { error: 'no reply' },
          accessBox
        );
      });
  }

  function show(position: number | null) {
    view.hover = position;
    refresh();
  }
  function pin(position: number) {
    view.position = Math.max(0, Math.min(total - 1, position));
    saved.position = view.position;
    refresh();
    clearTimeout(accessTimer);
    accessTimer = setTimeout(fetchAccesses, 250);
  }
  function start() {
    if (view.position >= total - 1) {
      view.position = 0;
    }
    play.textContent = '\u23f8 pause';
    view.timer = setInterval(() => {
      if (view.position >= total - 1) {
        stop();
        return;
      }
      view.position = Math.min(total - 1, view.position + view.speed);
      saved.position = view.position;
      refresh();
    }, 150);
    refresh();
  }
  function stop() {
    if (!view.timer) {
      return;
    }
    clearInterval(view.timer);
    view.timer = null;
    play.textContent = '\u25b6 play';
    fetchAccesses();
  }

  function refresh() {
    const position =
      view.hover === null || view.timer ? view.position : view.hover;
    const index = grid.length ? unravel(position, grid) : [];
    const following = Boolean(view.timer) || view.hover === null;
    const previous =
      position > 0 && following ? unravel(position - 1, grid) : null;
    let lit = 0;
    // Sampled programs are not consecutive: no "previous program" to compare with.
    for (const op of operands) {
      if (op.draw(index, !sampled && following ? previous : null)) {
        lit++;
      }
    }
    const program = actual(index);
    root.dataset.program = program.join(',');
    root.dataset.position = String(position);
    root.dataset.highlighted = String(lit);
    label.textContent =
      `program ${programText(program)} \u00b7 ${position + 1} of ${total}` +
      (sampled ? ' shown' : '');
    scrub.value = String(view.position);
    order.textContent = kernel.order[view.schedule];
    for (const [p, td] of cells) {
      td.classList.toggle('pl-tiles-current', p === position);
      td.classList.toggle('pl-tiles-pinned', p === view.position);
      td.classList.toggle(
        'pl-tiles-done',
        view.schedule === 'tpu' && p < position
      );
    }
    const g = gridCanvas?.getContext('2d');
    if (gridCanvas && g) {
      const width = gridCanvas.width;
      const height = gridCanvas.height;
      g.fillStyle = '#f6f8fa';
      g.fillRect(0, 0, width, height);
      if (view.schedule === 'tpu') {
        // Programs before this one in the TPU's order: done.
        const r = Math.floor(position / cols);
        const j = position % cols;
        g.fillStyle = '#d0d7de';
        g.fillRect(0, 0, width, (r / rowCount) * height);
        g.fillRect(
          0,
          (r / rowCount) * height,
          (j / cols) * width,
          Math.max(1, height / rowCount)
        );
      }
      const x = ((position % cols) / cols) * width;
      const y = (Math.floor(position / cols) / rowCount) * height;
      const cw = Math.max(2, width / cols);
      const ch = Math.max(2, height / rowCount);
      g.fillStyle = 'rgba(191, 135, 0, 0.35)';
      g.fillRect(x + cw / 2, 0, 1, height);
      g.fillRect(0, y + ch / 2, width, 1);
      g.fillStyle = '#bf8700';
      g.fillRect(x, y, cw, ch);
      gridCanvas.dataset.program = program.join(',');
    }
  }

  const facts = [
    `grid ${kernel.grid.length ? kernel.grid.join(' \u00d7 ') : '()'} = ` +
      `${kernel.programs} program${kernel.programs === 1 ? '' : 's'}`,
    kernel.semantics
      ? 'axes ' +
        kernel.semantics
          .map((sem, a) => `${kernel.axisNames[a] ?? a}: ${sem}`)
          .join(', ')
      : null
  ].filter(Boolean);
  append(root, [
    h('p', { class: 'pl-facts', text: facts.join(' \u00b7 ') }),
    h(
      'div',
      { class: 'pl-toolbar pl-tiles-controls' },
      play,
      speed,
      scrub,
      label,
      scheduleSelect
    ),
    order,
    h('div', { class: 'pl-tiles-programs' }, programs),
    h('div', { class: 'pl-tiles-operands' }, ...operands.map(o => o.el)),
    unmapped.length
      ? h(
          'ul',
          { class: 'pl-tiles-unmapped' },
          ...unmapped.map(o =>
            h('li', {
              class: 'pl-notice',
              text: `${o.label} (${o.role}): ${unmappedText(o)}`
            })
          )
        )
      : null,
    ...kernel.notices.map(n => h('p', { class: 'pl-notice', text: n })),
    h(
      'details',
      { class: 'pl-tiles-merit', open: 'open' },
      h('summary', { text: 'Figures of merit' }),
      merit.el
    ),
    kernel.mosaic
      ? h(
          'details',
          { class: 'pl-tiles-mosaic', open: 'open' },
          h('summary', {
            text: 'Mosaic GPU: shared memory, pipelines, copies'
          }),
          mosaicPart(kernel.mosaic)
        )
      : null,
    kernel.mosaicError
      ? h('p', {
          class: 'pl-notice',
          dataset: { role: 'mosaic' },
          text: kernel.mosaicError
        })
      : null,
    kernel.accessesNote
      ? h('p', {
          class: 'pl-notice',
          dataset: { role: 'accesses', status: 'none' },
          text: kernel.accessesNote
        })
      : accessPanel
  ]);
  refresh();
  setTimeout(fetchAccesses, 0);
  root.stop = stop;
  return root;
}

/** What the tab keeps across redraws. */
interface ITilesState {
  kernel: number;
  kernels: { [index: number]: ISaved };
  current?: ITilesKernelElement;
}

export const TILES: ITabRenderer<ITilesPane> = {
  render(root, data, ctx) {
    const state: ITilesState =
      ctx.state.tiles || (ctx.state.tiles = { kernel: 0, kernels: {} });
    state.current?.stop?.();
    if (!data.kernels.length) {
      root.append(h('p', { text: 'No Pallas kernels found.' }));
      return;
    }
    const holder = h('div', {});
    const draw = () => {
      state.current?.stop?.();
      clear(holder);
      const kernel =
        data.kernels.find(k => k.index === state.kernel) ?? data.kernels[0];
      if ('error' in kernel) {
        const failed = kernel as ITilesKernelError;
        holder.append(
          h('p', {
            class: 'pl-problem',
            text: `${failed.name}: ${failed.error}`
          })
        );
        return;
      }
      const saved =
        state.kernels[kernel.index] || (state.kernels[kernel.index] = {});
      state.current = tilesKernel(kernel, ctx, saved);
      holder.append(state.current);
    };
    if (data.kernels.length > 1) {
      root.append(
        h(
          'p',
          { class: 'pl-toolbar' },
          h(
            'label',
            { class: 'pl-control' },
            'kernel ',
            h(
              'select',
              {
                dataset: { role: 'kernel' },
                onchange: (e: Event) => {
                  state.kernel = Number((e.target as HTMLSelectElement).value);
                  draw();
                }
              },
              ...data.kernels.map(k =>
                h('option', {
                  value: k.index,
                  text: `${k.index}: ${k.name}`,
                  selected: k.index === state.kernel ? 'selected' : null
                })
              )
            )
          )
        )
      );
    }
    root.append(holder);
    draw();
  }
};
