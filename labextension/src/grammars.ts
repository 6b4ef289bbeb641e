/**
 * Grammars of the texts pallaslab shows: MLIR (Triton's tt/ttg/ttng, arith,
 * scf, Mosaic's tpu and mosaic_gpu, and the upstream dialects they use), LLVM
 * IR, PTX, SASS, TPU LLO, HLO, jaxpr and Python. The rules live in one file,
 * `grammars.json` (pallaslab/_src/views/grammars.json), which the widget, the
 * static HTML (Python) and these CodeMirror languages all read; the engine is
 * in `grammar.ts`.
 */

import { compileGrammar, IGrammar, IGrammarSpec, TokenClass } from './grammar';
import GRAMMAR_FILE from './grammars.json';

/** A language as the grammar file describes it. */
export interface ILanguageSpec {
  displayName: string;
  mime: string;
  extensions: string[];
  /** Other names the editor knows it by. */
  aliases?: string[];
  /** False for languages JupyterLab already highlights (Python). */
  editor?: boolean;
  blockComment?: [string, string];
  statementEnd?: string;
  rules: {
    token: TokenClass | null;
    pattern: string;
    atStart?: boolean;
    after?: TokenClass[];
    keepsStart?: boolean;
  }[];
}

const FILE = GRAMMAR_FILE as unknown as {
  aliases: { [alias: string]: string };
  languages: { [name: string]: ILanguageSpec };
};

/** Every language of the grammar file, by name. */
export const LANGUAGES: { [name: string]: ILanguageSpec } = FILE.languages;

/** Other names the same texts go by (pallaslab's target stages, file extensions). */
export const LANGUAGE_ALIASES: { [alias: string]: string } = FILE.aliases;

/** Dialects whose ops pallaslab's lowerings produce; others still highlight as ops. */
export const MLIR_DIALECTS = [
  'tt',
  'ttg',
  'ttng',
  'triton_gpu',
  'triton_nvidia_gpu',
  'arith',
  'scf',
  'cf',
  'tpu',
  'mosaic_gpu',
  'func',
  'memref',
  'vector',
  'math',
  'gpu',
  'nvvm',
  'nvgpu',
  'llvm',
  'builtin',
  'affine',
  'tensor',
  'stablehlo',
  'mhlo',
  'chlo',
  'sdy',
  'ub',
  'index',
  'proton'
];

function specOf(name: string, language: ILanguageSpec): IGrammarSpec {
  return {
    name,
    blockComment: language.blockComment,
    statementEnd: language.statementEnd,
    rules: language.rules.map(rule => ({
      token: rule.token,
      pattern: new RegExp(rule.pattern),
      atStart: rule.atStart,
      after: rule.after,
      keepsStart: rule.keepsStart
    }))
  };
}

/** The grammar specs by language name. */
export const GRAMMAR_SPECS: { [name: string]: IGrammarSpec } =
  Object.fromEntries(
    Object.entries(LANGUAGES).map(([name, language]) => [
      name,
      specOf(name, language)
    ])
  );

const compiled = new Map<string, IGrammar>();

/** The compiled grammar of a language or alias; null for one we do not know. */
export function grammarFor(language: string): IGrammar | null {
  const name = LANGUAGE_ALIASES[language] ?? language;
  const spec = GRAMMAR_SPECS[name];
  if (!spec) {
    return null;
  }
  let grammar = compiled.get(name);
  if (!grammar) {
    grammar = compileGrammar(spec);
    compiled.set(name, grammar);
  }
  return grammar;
}

/** Token classes, for tests and the highlighting tables. */
export const TOKEN_CLASSES: TokenClass[] = [
  'comment',
  'location',
  'string',
  'number',
  'keyword',
  'op',
  'dialect',
  'directive',
  'modifier',
  'type',
  'variable',
  'special',
  'label',
  'symbol',
  'attribute',
  'meta',
  'operator',
  'punctuation'
];
