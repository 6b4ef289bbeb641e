import {
  compileGrammar,
  IGrammarSpec,
  startState,
  tokenizeLine,
  tokenizeText
} from '../grammar';

const toy: IGrammarSpec = {
  name: 'toy',
  blockComment: ['/*', '*/'],
  statementEnd: ';',
  rules: [
    { token: 'label', pattern: /\w+:/, atStart: true, keepsStart: true },
    { token: 'op', pattern: /[a-z]+/, atStart: true },
    { token: 'modifier', pattern: /\.\w+/, after: ['op', 'modifier'] },
    { token: 'variable', pattern: /%\w+/ },
    { token: 'punctuation', pattern: /[,;]/ },
    { token: null, pattern: /\w+/ }
  ]
};
const grammar = compileGrammar(toy);

describe('tokenizeLine', () => {
  it('knows the start of a statement', () => {
    expect(tokenizeLine(grammar, 'mov %a, mov')).toEqual([
      ['op', 'mov'],
      [null, ' '],
      ['variable', '%a'],
      ['punctuation', ','],
      [null, ' mov']
    ]);
  });

  it('keeps the statement start after labels, and restarts after its end', () => {
    expect(tokenizeLine(grammar, 'top: add %x; sub')).toEqual([
      ['label', 'top:'],
      [null, ' '],
      ['op', 'add'],
      [null, ' '],
      ['variable', '%x'],
      ['punctuation', ';'],
      [null, ' '],
      ['op', 'sub']
    ]);
  });

  it('applies "after" rules only to a token that touches the previous one', () => {
    expect(tokenizeLine(grammar, 'ld.global.v4 .x')).toEqual([
      ['op', 'ld'],
      ['modifier', '.global.v4'],
      [null, ' .x']
    ]);
  });

  it('carries block comments across lines', () => {
    const lines = tokenizeText(grammar, 'add /* one\ntwo */ sub\nmul');
    expect(lines[0]).toEqual([
      ['op', 'add'],
      [null, ' '],
      ['comment', '/* one']
    ]);
    expect(lines[1]).toEqual([
      ['comment', 'two */'],
      [null, ' '],
      ['op', 'sub']
    ]);
    expect(lines[2]).toEqual([['op', 'mul']]);
  });

  it('always makes progress and keeps every character', () => {
    const line = '@@@ ~~ mov %a.b;;; \u00e9\u00e9 \t';
    const tokens = tokenizeLine(grammar, line, startState());
    expect(tokens.map(([, text]) => text).join('')).toBe(line);
  });
});
