/** Jaxpr tab: each kernel's jaxpr (and the program's) beside its source, linked by line. */

import type { IJaxprPane } from '../../contracts';
import {
  CodeView,
  ILinker,
  inLab,
  layoutControls,
  linkViews,
  openTextButton,
  openTextSources,
  requestText
} from '../code';
import { ITabRenderer } from '../context';
import { clear, h } from '../dom';

export const JAXPR: ITabRenderer<IJaxprPane> = {
  render(root, data, ctx) {
    if (!data.views.length) {
      root.append(h('p', { text: 'No jaxpr.' }));
      return;
    }
    let current: string = ctx.state.jaxprView || data.views[0].id;
    if (!data.views.some(v => v.id === current)) {
      current = data.views[0].id;
    }
    const picker = h(
      'select',
      { class: 'pl-picker', 'aria-label': 'jaxpr to show' },
      ...data.views.map(v => {
        const option = h('option', { value: v.id, text: v.title });
        option.selected = v.id === current;
        return option;
      })
    );
    const panes = h('div', { class: 'pl-split' });
    const show = (id: string) => {
      ctx.state.jaxprView = id;
      clear(panes);
      const view = data.views.find(v => v.id === id) ?? data.views[0];
      const used = new Set(view.map.map(([, file]) => file));
      let linker: ILinker | null = null;
      const sourceViews = data.files.map((file, index) =>
        used.has(index)
          ? new CodeView({
              lines: file.lines,
              first: file.first,
              language: 'python',
              marks: file.marks,
              title: file.label,
              onHover: line => linker?.onSourceHover(index, line)
            })
          : null
      );
      const textView = new CodeView({
        lines: view.text.split('\n'),
        language: 'jaxpr',
        title: view.title,
        onHover: line => linker?.onTextHover(line)
      });
      linker = linkViews(textView, sourceViews, view.map);
      const left = h(
        'div',
        { class: 'pl-pane' },
        ...sourceViews.map(v => v?.el ?? null)
      );
      if (!sourceViews.some(Boolean)) {
        left.append(
          h('p', {
            class: 'pl-notice',
            text: 'No source lines are linked to this jaxpr.'
          })
        );
      }
      const shown = view.text.split('\n').length;
      const where = inLab()
        ? ': open it in a new tab to see all.'
        : '; the whole jaxpr is in Python (e.g. _kernel.kernels[0].jaxpr).';
      const clipped =
        view.lines > shown
          ? `Showing the first ${shown.toLocaleString()} of ${view.lines.toLocaleString()} lines${where}`
          : view.clipped
            ? `Long lines are cut${where}`
            : '';
      panes.append(
        left,
        h(
          'div',
          { class: 'pl-pane' },
          textView.el,
          clipped
            ? h('p', { class: 'pl-notice pl-clipped', text: clipped })
            : null
        )
      );
    };
    picker.addEventListener('change', () => show(picker.value));
    const open = openTextButton(() => {
      const view =
        data.views.find(v => v.id === ctx.state.jaxprView) ?? data.views[0];
      if (view.clipped || view.lines > view.text.split('\n').length) {
        return requestText(ctx.request, view.id);
      }
      return {
        title: `jaxpr \u00b7 ${view.title}`,
        language: 'jaxpr',
        text: view.text,
        sourceMap: view.map,
        sources: openTextSources(data.files)
      };
    });
    root.append(
      h(
        'div',
        { class: 'pl-toolbar' },
        h('label', { class: 'pl-control' }, 'Show ', picker),
        layoutControls(panes, ctx.state, { wrap: true }),
        open,
        h('span', {
          class: 'pl-aside',
          text: 'hover a line to see where it comes from'
        })
      ),
      panes
    );
    show(current);
  }
};
