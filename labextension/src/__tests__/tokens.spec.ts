// The one grammar file, tokenized here as the widget and the lab extension do, and in
// Python as the static HTML does (tests/test_highlight.py): both must give these.
import { tokenizeText } from '../grammar';
import { grammarFor, LANGUAGES } from '../grammars';
import EXPECTED from './tokens.json';

interface ICase {
  language: string;
  lines: string[];
  tokens: [string | null, string][][];
}

describe('the shared grammar file', () => {
  const cases = (EXPECTED as unknown as { cases: ICase[] }).cases;

  it('has expected tokens for every language', () => {
    expect(cases.map(c => c.language).sort()).toEqual(
      Object.keys(LANGUAGES).sort()
    );
  });

  for (const { language, lines, tokens } of cases) {
    it(`tokenizes ${language} as Python does`, () => {
      const grammar = grammarFor(language)!;
      expect(tokenizeText(grammar, lines.join('\n'))).toEqual(tokens);
    });
  }
});
