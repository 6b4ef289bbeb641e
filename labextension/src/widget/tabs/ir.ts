/**
 * IR tab: a kernel lowered for a target, beside its source, linked line by line.
 * Nothing is lowered until a target is chosen; the text then arrives in pieces
 * (requests answered by `views/tabs/ir.py`), drawn as it comes.
 */

import type {
  IIrChunkReply,
  IIrChunkRequest,
  IIrFailedReply,
  IIrLoweredReply,
  IIrLowerRequest,
  IIrPane,
  ResourcesModel,
  SourceMapEntry
} from '../../contracts';
import {
  CodeView,
  dispatchOpenText,
  ILinker,
  inLab,
  layoutControls,
  linkViews,
  openTextSources,
  VirtualCodeView
} from '../code';
import { ITabContext, ITabRenderer, isError } from '../context';
import { clear, h, table } from '../dom';

/** The open-text language of a lowering's language (all the grammar file knows). */
const OPEN_LANGUAGES = new Set([
  'mlir',
  'ptx',
  'sass',
  'llvm',
  'jaxpr',
  'llo',
  'hlo'
]);

/** A lowering being fetched or fetched: its summary, the lines so far, the view. */
interface IEntry {
  summary: IIrLoweredReply;
  lines: string[];
  map: SourceMapEntry[];
  complete: boolean;
  view: IDrawn | null;
}

interface IDrawn {
  textView: VirtualCodeView;
  linker: ILinker;
  generation: number;
}

/** What the tab keeps across redraws of its pane. */
interface IIrState {
  kernel: number;
  target: string;
  stage: string;
  chosen: boolean;
  cache: Map<string, IEntry>;
  generation: number;
  ui?: {
    status: HTMLElement;
    openButton: HTMLButtonElement;
    headerBox: HTMLElement;
  };
}

function key(kernel: number, target: string, stage: string): string {
  return `${kernel}|${target}|${stage}`;
}

/** The resources panel: a one-line summary, the details folded. */
export function resourcesBox(
  resources: ResourcesModel | null
): HTMLElement | null {
  if (!resources) {
    return null;
  }
  const box = h(
    'details',
    { class: 'pl-ir-resources' },
    h('summary', {}, h('b', { text: 'Resources: ' }), resources.summary)
  );
  box.append(table(['', ''], resources.facts));
  if (resources.kind === 'gpu') {
    box.append(
      h('h4', { text: 'Theoretical occupancy' }),
      table(
        ['GPU', 'arch', 'blocks / SM', 'warps / SM', 'occupancy', 'limited by'],
        resources.occupancy.map(o => [
          o.gpu + (o.sameArch ? '' : ' *'),
          o.arch,
          String(o.blocks),
          o.warps,
          h(
            'span',
            { class: 'pl-occupancy' },
            h(
              'span',
              { class: 'pl-meter' },
              h('span', {
                class: 'pl-meter-fill',
                style: `width:${o.percent}%`
              })
            ),
            ` ${o.percent}%`
          ),
          o.blocks === 0 ? `cannot launch: ${o.limiter}` : o.limiter
        ])
      ),
      h('p', {
        class: 'pl-notice',
        text: '* compiled for another architecture: its registers and shared memory may differ there.'
      })
    );
    return box;
  }
  const percent = Math.min(100, 100 * resources.vmemFraction);
  box.append(
    h(
      'div',
      { class: 'pl-vmem' },
      'VMEM ',
      h(
        'span',
        { class: 'pl-meter pl-meter-wide' },
        h('span', {
          class:
            'pl-meter-fill' +
            (resources.vmemFraction > 1 ? ' pl-meter-over' : ''),
          style: `width:${percent}%`
        })
      )
    )
  );
  if (resources.blocks.length) {
    box.append(
      table(
        [
          'operand',
          'role',
          'block',
          'dtype',
          'buffers',
          'bytes',
          'in (8, 128) tiles'
        ],
        resources.blocks.map(b => [
          b.operand,
          b.role,
          b.block,
          b.dtype,
          String(b.buffers),
          b.bytes,
          b.padded
        ])
      )
    );
  }
  for (const t of resources.tiling) {
    box.append(
      h(
        'div',
        { class: 'pl-problem' },
        h('b', {
          text: t.where ? `${t.where.label} line ${t.where.line}: ` : ''
        }),
        t.message,
        h('div', { class: 'pl-problem-hint', text: t.hint })
      )
    );
  }
  if (resources.utilization.length) {
    box.append(
      h('h4', { text: 'Mean slots used per bundle, over the whole kernel' }),
      table(
        ['unit', 'slots', 'mean used'],
        resources.utilization.map(u => [
          u.unit,
          String(u.slots),
          String(u.mean)
        ])
      )
    );
  }
  return box;
}

type Answer = IIrLoweredReply | IIrChunkReply | IIrFailedReply;

export const IR: ITabRenderer<IIrPane> = {
  render(root, data, ctx: ITabContext) {
    const state: IIrState =
      ctx.state.ir ||
      (ctx.state.ir = {
        kernel: data.initial.kernel,
        target: data.initial.target,
        stage: '',
        chosen: false,
        cache: new Map(),
        generation: 0
      });
    // Lowerings and their text come from Python on request, piece by piece.
    const ask = (
      body: IIrLowerRequest | IIrChunkRequest,
      reply: (answer: Answer) => void
    ) =>
      void ctx
        .request(body)
        .then(answer =>
          reply(
            isError(answer)
              ? { type: 'failed', message: answer.error }
              : (answer as Answer)
          )
        );

    const targets = data.targets;
    const kernelPicker = h(
      'select',
      { class: 'pl-picker', 'aria-label': 'kernel' },
      ...data.kernels.map(k =>
        h('option', { value: String(k.index), text: `kernel ${k.name}` })
      )
    );
    if (!data.kernels.length) {
      kernelPicker.append(h('option', { value: '0', text: 'program' }));
    }
    kernelPicker.value = String(state.kernel);
    const groups = new Map<string, HTMLOptGroupElement>();
    for (const t of targets) {
      if (!groups.has(t.group)) {
        groups.set(t.group, h('optgroup', { label: t.group }));
      }
      groups.get(t.group)!.append(
        h('option', {
          value: t.name,
          text: t.name + (t.unavailable ? ' (not installed)' : ''),
          title: t.unavailable || t.title
        })
      );
    }
    const targetPicker = h(
      'select',
      { class: 'pl-picker', 'aria-label': 'target' },
      ...groups.values()
    );
    targetPicker.value = state.target;
    const stagePicker = h('select', {
      class: 'pl-picker',
      'aria-label': 'stage',
      hidden: true
    });
    const status = h('span', { class: 'pl-ir-status pl-toolbar-note' });
    const openButton = h('button', {
      class: 'pl-button pl-open-text',
      type: 'button',
      text: 'Open in new tab',
      hidden: true,
      title: 'Open this text in a JupyterLab tab of its own'
    });
    // Each label stays with its control: a narrow pane wraps whole controls.
    const toolbar = h(
      'div',
      { class: 'pl-toolbar' },
      h('label', { class: 'pl-control' }, 'Kernel ', kernelPicker),
      h('label', { class: 'pl-control' }, 'target ', targetPicker),
      h('label', { class: 'pl-control', hidden: true }, 'stage ', stagePicker),
      openButton,
      status
    );
    const stageControl = stagePicker.parentElement as HTMLElement;
    // What the chosen stage is ("final" and each pass of the pipeline), in words.
    const stageNote = h('div', {
      class: 'pl-notice pl-ir-stage',
      dataset: { role: 'stage-note' },
      hidden: true
    });
    const headerBox = h('div', { class: 'pl-ir-header' });
    // Pieces still arriving for an earlier drawing of this pane report here.
    state.ui = { status, openButton, headerBox };
    const panes = h('div', { class: 'pl-split' });
    // Long IR lines scroll sideways (the view draws only the rows in sight).
    toolbar.append(layoutControls(panes, ctx.state, { wrap: false }));
    const resourcesHolder = h('div');
    root.append(toolbar, stageNote, headerBox, resourcesHolder, panes);

    const done = (summary: IIrLoweredReply) =>
      summary.error && !summary.lines
        ? 'could not lower'
        : `${summary.lines} lines, ${summary.mapped} linked to source` +
          (summary.seconds ? ` \u00b7 lowered in ${summary.seconds} s` : '');
    const loading = (entry: IEntry) =>
      `Loading ${entry.lines.length} of ${entry.summary.lines} lines\u2026`;
    const titleOf = (summary: IIrLoweredReply) =>
      (summary.kernel ? `${summary.kernel} \u00b7 ` : '') +
      state.target +
      (state.stage ? ` \u00b7 ${state.stage}` : '');

    // Draws a lowering (complete, or its summary with text still arriving).
    const draw = (entry: IEntry, generation: number): IDrawn | null => {
      const summary = entry.summary;
      status.textContent = entry.complete ? done(summary) : loading(entry);
      // Stages (a compile's pass pipeline, its reports): the main text is "final".
      clear(stagePicker);
      stageControl.hidden = !summary.stages.length;
      stageNote.hidden = !summary.stages.length;
      if (summary.stages.length) {
        const titles = summary.stageTitles ?? [];
        stagePicker.append(
          h('option', { value: '', text: 'final', title: summary.finalTitle }),
          ...summary.stages.map((s, k) =>
            h('option', { value: s, text: s, title: titles[k] ?? '' })
          )
        );
        stagePicker.value = state.stage;
        const at = summary.stages.indexOf(state.stage);
        stageNote.textContent =
          `${state.stage || 'final'}: ` +
          ((at >= 0 ? titles[at] : summary.finalTitle) ?? '');
      }
      headerBox.append(h('div', { class: 'pl-notice', text: summary.header }));
      for (const note of summary.notes) {
        headerBox.append(h('div', { class: 'pl-notice', text: note }));
      }
      if (summary.costNote) {
        headerBox.append(
          h('div', { class: 'pl-notice pl-cost-note', text: summary.costNote })
        );
      }
      const sourceViews: (CodeView | null)[] = [];
      const left = h('div', { class: 'pl-pane' });
      let linker: ILinker | null = null;
      const sourceView = (index: number): CodeView | null => {
        if (sourceViews[index] || !data.files[index]) {
          return sourceViews[index] ?? null;
        }
        const file = data.files[index];
        const costs = summary.costs.filter(c => c.file === index);
        const view = new CodeView({
          lines: file.lines,
          first: file.first,
          language: 'python',
          marks: file.marks,
          title: file.label,
          gutter: costs.length
            ? new Map(
                costs.map(c => [c.line, { text: c.text, title: c.title }])
              )
            : undefined,
          onHover: line => linker?.onSourceHover(index, line),
          onClick: line => linker?.onSourceClick(index, line)
        });
        sourceViews[index] = view;
        left.append(view.el);
        // Long files open at their kernel, not at their first line.
        const mark = file.marks.find(m => m.kind === 'kernel');
        if (mark) {
          setTimeout(() => view.revealLine(mark.line), 0);
        }
        return view;
      };
      const error = summary.error;
      if (error) {
        const where = error.where
          ? `${error.where.label} line ${error.where.line}: `
          : '';
        headerBox.append(
          h(
            'div',
            { class: 'pl-problem', role: 'alert' },
            h('b', { text: where }),
            error.message,
            error.detail && error.detail !== error.message
              ? h(
                  'details',
                  {},
                  h('summary', { text: 'compiler message' }),
                  h('pre', { class: 'pl-detail', text: error.detail })
                )
              : null
          )
        );
        const index = error.where
          ? data.files.findIndex(f => f.file === error.where!.file)
          : -1;
        if (index >= 0) {
          const view = sourceView(index)!;
          view.highlight([error.where!.line]);
          panes.append(left);
          setTimeout(() => view.revealLine(error.where!.line), 0);
        }
        const box = resourcesBox(summary.resources);
        if (box) {
          resourcesHolder.append(box);
        }
        if (entry.complete && !summary.lines) {
          return null;
        }
      }
      const textView = new VirtualCodeView({
        language: summary.language,
        title: titleOf(summary),
        onHover: line => linker?.onTextHover(line),
        onClick: line => linker?.onTextClick(line)
      });
      linker = linkViews(textView, sourceViews, [], { sourceView });
      if (!error) {
        panes.append(left, h('div', { class: 'pl-pane' }, textView.el));
      }
      if (!error && summary.unlinked) {
        // Nothing links the text to the source: say why where the source would be,
        // and show the kernel's source anyway rather than a blank half.
        left.append(
          h('p', {
            class: 'pl-notice pl-unlinked',
            dataset: { role: 'unlinked' },
            text: summary.unlinked
          })
        );
        const kernelFile = data.files.findIndex(f =>
          f.marks.some(m => m.kind === 'kernel')
        );
        sourceView(kernelFile >= 0 ? kernelFile : 0);
      }
      textView.append(entry.lines);
      linker.addMap(entry.map);
      if (!error) {
        const box = resourcesBox(summary.resources);
        if (box) {
          resourcesHolder.append(box);
        }
      }
      openButton.hidden = !(entry.complete && inLab());
      openButton.onclick = () =>
        dispatchOpenText(openButton, {
          title:
            `${summary.kernel || 'program'} \u00b7 ${state.target}` +
            (state.stage ? ` \u00b7 ${state.stage}` : ''),
          language: OPEN_LANGUAGES.has(summary.language)
            ? summary.language
            : 'mlir',
          text: entry.lines.join('\n'),
          sourceMap: entry.map,
          sources: openTextSources(data.files)
        });
      return { textView, linker, generation };
    };

    const show = () => {
      const generation = ++state.generation;
      const cacheKey = key(state.kernel, state.target, state.stage);
      clear(headerBox);
      clear(panes);
      clear(resourcesHolder);
      openButton.hidden = true;
      const cached = state.cache.get(cacheKey);
      if (cached) {
        // Complete, or still arriving (the pane was drawn again meanwhile): the
        // pieces still to come go to the view drawn now.
        cached.view = draw(cached, generation);
        return;
      }
      status.textContent = 'Lowering\u2026';
      const asked = {
        kernel: state.kernel,
        target: state.target,
        stage: state.stage
      };
      ask({ type: 'lower', ...asked }, summary => {
        if (summary.type !== 'lowered') {
          if (generation !== state.generation) {
            return;
          }
          status.textContent = '';
          headerBox.append(
            h('p', {
              class: 'pl-problem',
              text:
                summary.type === 'failed' ? summary.message : 'unexpected reply'
            })
          );
          return;
        }
        const entry: IEntry = {
          summary,
          lines: [],
          map: [],
          complete: summary.chunks === 0,
          view: null
        };
        state.cache.set(cacheKey, entry);
        if (generation === state.generation) {
          entry.view = draw(entry, generation);
        }
        const fetch = (index: number) =>
          ask({ type: 'chunk', index, ...asked }, piece => {
            const ui = state.ui!;
            if (piece.type !== 'chunk') {
              state.cache.delete(cacheKey);
              if (entry.view) {
                ui.headerBox.append(
                  h('p', {
                    class: 'pl-problem',
                    text:
                      piece.type === 'failed'
                        ? piece.message
                        : 'unexpected reply'
                  })
                );
              }
              return;
            }
            for (const line of piece.lines) {
              entry.lines.push(line);
            }
            for (const m of piece.map) {
              entry.map.push(m);
            }
            entry.complete = piece.last;
            const view = entry.view;
            if (view && view.generation === state.generation) {
              view.textView.append(piece.lines);
              view.linker.addMap(piece.map);
              ui.status.textContent = piece.last
                ? done(summary)
                : loading(entry);
              if (piece.last) {
                ui.openButton.hidden = !inLab();
              }
            }
            if (!piece.last) {
              fetch(index + 1);
            }
          });
        if (summary.chunks > 0) {
          fetch(0);
        }
      });
    };

    kernelPicker.addEventListener('change', () => {
      state.kernel = Number(kernelPicker.value);
      const kernel = data.kernels.find(k => k.index === state.kernel);
      const target = targets.find(t => t.name === state.target);
      if (
        kernel &&
        target &&
        !target.program &&
        state.target !== kernel.defaultTarget &&
        !state.chosen
      ) {
        state.target = kernel.defaultTarget;
        targetPicker.value = state.target;
      }
      state.stage = '';
      show();
    });
    targetPicker.addEventListener('change', () => {
      state.target = targetPicker.value;
      state.chosen = true;
      state.stage = '';
      show();
    });
    stagePicker.addEventListener('change', () => {
      state.stage = stagePicker.value;
      show();
    });
    show();
  }
};
