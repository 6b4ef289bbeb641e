/**
 * The grammars as CodeMirror 6 languages, and their registration with
 * JupyterLab's editor language registry (for .mlir, .ll, .ptx, .llo, .hlo
 * and .jaxpr files and for the text views).
 */

import {
  HighlightStyle,
  LanguageSupport,
  StreamLanguage,
  StreamParser,
  syntaxHighlighting
} from '@codemirror/language';
import { classHighlighter, tags } from '@lezer/highlight';
import type { IEditorLanguageRegistry } from '@jupyterlab/codemirror';

import {
  copyState,
  IGrammar,
  ITokenizerState,
  nextToken,
  startLine,
  startState,
  TokenClass
} from './grammar';
import { grammarFor, LANGUAGES } from './grammars';

/** Highlight tags per token class (names as CodeMirror's StreamLanguage reads them). */
export const TOKEN_TAGS: { [cls in TokenClass]: string } = {
  comment: 'comment',
  location: 'meta',
  string: 'string',
  number: 'number',
  keyword: 'keyword',
  op: 'keyword',
  dialect: 'namespace',
  directive: 'keyword',
  modifier: 'propertyName',
  type: 'typeName',
  variable: 'variableName',
  special: 'variableName.special',
  label: 'labelName',
  symbol: 'variableName.definition',
  attribute: 'attributeName',
  meta: 'meta',
  operator: 'operator',
  punctuation: 'punctuation'
};

/** A CodeMirror stream parser driven by a grammar. */
export function streamParser(grammar: IGrammar): StreamParser<ITokenizerState> {
  return {
    name: grammar.name,
    startState: () => startState(),
    copyState: state => copyState(state),
    token(stream, state) {
      if (stream.sol()) {
        startLine(state);
      }
      const { token, end } = nextToken(
        grammar,
        stream.string,
        stream.pos,
        state
      );
      stream.pos = Math.max(end, stream.pos + 1);
      return token ? TOKEN_TAGS[token] : null;
    },
    blankLine(state) {
      startLine(state);
    },
    languageData: grammar.blockComment
      ? {
          commentTokens: {
            block: {
              open: grammar.blockComment[0],
              close: grammar.blockComment[1]
            }
          }
        }
      : { commentTokens: { line: grammar.name === 'llvm' ? ';' : '//' } }
  };
}

// Colours for the tags JupyterLab's own highlight style leaves plain (types,
// dialects, symbols), from the theme's editor variables so dark themes work.
const irHighlightStyle = HighlightStyle.define([
  {
    tag: tags.typeName,
    color: 'var(--jp-mirror-editor-variable-3-color, #085)'
  },
  {
    tag: tags.namespace,
    color: 'var(--jp-mirror-editor-builtin-color, #008000)'
  },
  {
    tag: tags.definition(tags.variableName),
    color: 'var(--jp-mirror-editor-def-color, #00f)'
  },
  {
    tag: tags.variableName,
    color: 'var(--jp-mirror-editor-variable-color, #212121)'
  },
  {
    tag: tags.meta,
    color: 'var(--jp-mirror-editor-comment-color, #408080)',
    opacity: '0.75'
  }
]);

const supports = new Map<string, LanguageSupport>();

/**
 * The CodeMirror language support for a language name or alias (null for one
 * pallaslab does not know). Adds stable `tok-*` classes next to the theme's
 * colours, so views and tests can see what each piece of text is.
 */
export function languageSupport(language: string): LanguageSupport | null {
  const grammar = grammarFor(language);
  if (!grammar) {
    return null;
  }
  let support = supports.get(grammar.name);
  if (!support) {
    const lang = StreamLanguage.define(streamParser(grammar));
    support = new LanguageSupport(lang, [
      syntaxHighlighting(irHighlightStyle),
      syntaxHighlighting(classHighlighter)
    ]);
    supports.set(grammar.name, support);
  }
  return support;
}

/** How each language is presented to JupyterLab (those its editor highlights). */
export const LANGUAGE_INFO: {
  [name: string]: {
    displayName: string;
    mime: string;
    extensions: string[];
    aliases: string[];
  };
} = Object.fromEntries(
  Object.entries(LANGUAGES)
    .filter(([, language]) => language.editor !== false)
    .map(([name, language]) => [
      name,
      {
        displayName: language.displayName,
        mime: language.mime,
        extensions: language.extensions,
        aliases: language.aliases ?? [name]
      }
    ])
);

/** The mime type the editor uses for a language name or alias. */
export function mimeFor(language: string): string {
  const grammar = grammarFor(language);
  return grammar
    ? (LANGUAGES[grammar.name]?.mime ?? 'text/plain')
    : 'text/plain';
}

/** Registers every language with JupyterLab's editor language registry. */
export function registerLanguages(registry: IEditorLanguageRegistry): void {
  for (const [name, info] of Object.entries(LANGUAGE_INFO)) {
    registry.addLanguage({
      name: info.displayName,
      displayName: info.displayName,
      alias: info.aliases,
      mime: info.mime,
      extensions: info.extensions,
      load: async () => languageSupport(name) as LanguageSupport
    });
  }
}
