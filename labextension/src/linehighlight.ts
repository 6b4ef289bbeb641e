/**
 * Highlighting whole lines of a CodeMirror editor: the lines given by the latest
 * effect are decorated with one class (kept in place as the document is edited).
 */

import { StateEffect, StateField } from '@codemirror/state';
import { Decoration, DecorationSet, EditorView } from '@codemirror/view';

/** An effect that sets the highlighted lines (1-based), and the field that draws them. */
export function lineHighlight(className: string): {
  setLines: ReturnType<typeof StateEffect.define<number[]>>;
  field: StateField<DecorationSet>;
} {
  const setLines = StateEffect.define<number[]>();
  const decoration = Decoration.line({ class: className });
  const field = StateField.define<DecorationSet>({
    create: () => Decoration.none,
    update(value, transaction) {
      value = value.map(transaction.changes);
      for (const effect of transaction.effects) {
        if (effect.is(setLines)) {
          const doc = transaction.state.doc;
          value = Decoration.set(
            effect.value
              .filter(line => line >= 1 && line <= doc.lines)
              .map(line => decoration.range(doc.line(line).from)),
            true
          );
        }
      }
      return value;
    },
    provide: f => EditorView.decorations.from(f)
  });
  return { setLines, field };
}
