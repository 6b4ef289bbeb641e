/** Source tab: the code the kernels come from, kernel and BlockSpec lines marked. */

import type { ISourcePane } from '../../contracts';
import { CodeView } from '../code';
import { ITabRenderer } from '../context';
import { h } from '../dom';

export const SOURCE: ITabRenderer<ISourcePane> = {
  render(root, data) {
    if (!data.files.length) {
      root.append(
        h('p', { text: 'No source is available for these kernels.' })
      );
    }
    for (const file of data.files) {
      const view = new CodeView({
        lines: file.lines,
        first: file.first,
        language: 'python',
        marks: file.marks,
        title: file.label
      });
      root.append(view.el);
    }
  }
};
