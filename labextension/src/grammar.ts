/**
 * A small rule-based tokenizer for compiler IRs, shared by the CodeMirror
 * languages (one token at a time, through a StreamParser) and the unit tests
 * (one line at a time). No DOM and no CodeMirror here.
 *
 * IRs are line-oriented: what a word means depends mostly on where it stands in
 * its statement (PTX's `ld` is an opcode at the start of a statement and a
 * plain name elsewhere). So a rule can be restricted to the start of a
 * statement or to right after a token of a given class; that is all the
 * context the grammars need, apart from block comments.
 */

/** The classes a grammar sorts text into; the languages map them to highlight tags. */
export type TokenClass =
  | 'comment'
  | 'location'
  | 'string'
  | 'number'
  | 'keyword'
  | 'op'
  | 'dialect'
  | 'directive'
  | 'modifier'
  | 'type'
  | 'variable'
  | 'special'
  | 'label'
  | 'symbol'
  | 'attribute'
  | 'meta'
  | 'operator'
  | 'punctuation';

/** One rule as written in a grammar. */
export interface IRuleSpec {
  /** The class of what the rule matches; null consumes text as plain. */
  token: TokenClass | null;
  /** The pattern, matched at the current position (no flags needed). */
  pattern: RegExp;
  /** Only at the start of a statement. */
  atStart?: boolean;
  /** Only right after a token of one of these classes (no space between). */
  after?: TokenClass[];
  /** After this token the statement has still not started (labels, predicates). */
  keepsStart?: boolean;
}

/** A language's rules, tried in order at each position. */
export interface IGrammarSpec {
  name: string;
  rules: IRuleSpec[];
  /** Opening and closing delimiters of comments that may span lines. */
  blockComment?: [string, string];
  /** Characters after which a new statement starts (besides a line start). */
  statementEnd?: string;
}

interface IRule extends IRuleSpec {
  sticky: RegExp;
}

/** A grammar, compiled for matching at a position. */
export interface IGrammar {
  name: string;
  rules: IRule[];
  blockComment?: [string, string];
  statementEnd: string;
}

/** What the tokenizer carries from one token (and line) to the next. */
export interface ITokenizerState {
  inComment: boolean;
  atStart: boolean;
  /** Class of the previous token when it ended exactly where we stand. */
  prev: TokenClass | null;
  prevEnd: number;
}

/** One token: [class, text]; class null is plain text (including spaces). */
export type Token = [TokenClass | null, string];

/** Compiles a grammar's rules into sticky regular expressions. */
export function compileGrammar(spec: IGrammarSpec): IGrammar {
  return {
    name: spec.name,
    blockComment: spec.blockComment,
    statementEnd: spec.statementEnd ?? '',
    rules: spec.rules.map(rule => ({
      ...rule,
      sticky: new RegExp(
        rule.pattern.source,
        'y' + rule.pattern.flags.replace(/[gy]/g, '')
      )
    }))
  };
}

/** The state at the start of a text. */
export function startState(): ITokenizerState {
  return { inComment: false, atStart: true, prev: null, prevEnd: -1 };
}

/** A copy of a state (CodeMirror keeps states per line). */
export function copyState(state: ITokenizerState): ITokenizerState {
  return { ...state };
}

/** Prepares a state for a new line: every line starts a statement. */
export function startLine(state: ITokenizerState): void {
  state.atStart = true;
  state.prev = null;
  state.prevEnd = -1;
}

/**
 * Reads one token of `line` at `pos`, updating `state`.
 *
 * @returns The token's class (null for plain text) and where it ends; always
 *   past `pos` when `pos` is inside the line.
 */
export function nextToken(
  grammar: IGrammar,
  line: string,
  pos: number,
  state: ITokenizerState
): { token: TokenClass | null; end: number } {
  if (state.inComment && grammar.blockComment) {
    const close = grammar.blockComment[1];
    const at = line.indexOf(close, pos);
    const end = at < 0 ? line.length : at + close.length;
    state.inComment = at < 0;
    return { token: 'comment', end: Math.max(end, pos + 1) };
  }
  const space = /\s+/y;
  space.lastIndex = pos;
  if (space.test(line)) {
    return { token: null, end: space.lastIndex };
  }
  if (grammar.blockComment && line.startsWith(grammar.blockComment[0], pos)) {
    const close = grammar.blockComment[1];
    const at = line.indexOf(close, pos + grammar.blockComment[0].length);
    if (at < 0) {
      state.inComment = true;
      return { token: 'comment', end: line.length };
    }
    return { token: 'comment', end: at + close.length };
  }
  const prev = state.prevEnd === pos ? state.prev : null;
  for (const rule of grammar.rules) {
    if (rule.atStart && !state.atStart) {
      continue;
    }
    if (rule.after && (prev === null || !rule.after.includes(prev))) {
      continue;
    }
    rule.sticky.lastIndex = pos;
    const match = rule.sticky.exec(line);
    if (!match || match[0].length === 0) {
      continue;
    }
    const end = pos + match[0].length;
    if (!rule.keepsStart) {
      state.atStart = false;
    }
    if (
      grammar.statementEnd &&
      grammar.statementEnd.includes(match[0][match[0].length - 1])
    ) {
      state.atStart = true;
    }
    state.prev = rule.token;
    state.prevEnd = end;
    return { token: rule.token, end };
  }
  // Nothing matched: one plain character.
  const char = line[pos];
  state.atStart = grammar.statementEnd.includes(char);
  state.prev = null;
  state.prevEnd = pos + 1;
  return { token: null, end: pos + 1 };
}

/**
 * Splits one line into tokens, merging neighbours of the same class.
 *
 * @param state - The state at the line's start (updated to its end); a fresh
 *   state when omitted.
 */
export function tokenizeLine(
  grammar: IGrammar,
  line: string,
  state: ITokenizerState = startState()
): Token[] {
  startLine(state);
  const tokens: Token[] = [];
  let pos = 0;
  while (pos < line.length) {
    const { token, end } = nextToken(grammar, line, pos, state);
    const text = line.slice(pos, end);
    const last = tokens[tokens.length - 1];
    if (last && last[0] === token) {
      last[1] += text;
    } else {
      tokens.push([token, text]);
    }
    pos = end;
  }
  return tokens;
}

/** Tokenizes a whole text, carrying state (block comments) across lines. */
export function tokenizeText(grammar: IGrammar, text: string): Token[][] {
  const state = startState();
  return text.split('\n').map(line => tokenizeLine(grammar, line, state));
}
