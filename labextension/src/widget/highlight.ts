/**
 * Syntax highlighting in the widget: the one grammar file (shared with Python's
 * static HTML and the lab extension's CodeMirror languages), tokenized by the lab
 * extension's engine, drawn as text in `pl-tok-<class>` spans.
 */

import { tokenizeLine } from '../grammar';
import { grammarFor } from '../grammars';
import { h } from './dom';

/** One line as highlighted DOM: text nodes and token spans. */
export function highlightedLine(
  line: string,
  language: string
): DocumentFragment {
  const fragment = document.createDocumentFragment();
  const grammar = grammarFor(language);
  if (!grammar) {
    fragment.appendChild(document.createTextNode(line));
    return fragment;
  }
  for (const [cls, text] of tokenizeLine(grammar, line)) {
    fragment.appendChild(
      cls
        ? h('span', { class: `pl-tok-${cls}`, text })
        : document.createTextNode(text)
    );
  }
  return fragment;
}
