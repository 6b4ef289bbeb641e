// The grammars through CodeMirror itself: StreamLanguage parses, the highlighter
// tags, so what the editor shows is checked without a browser.
import { highlightTree } from '@lezer/highlight';
import { classHighlighter } from '@lezer/highlight';
import { StringStream } from '@codemirror/language';

import { startState, tokenizeLine } from '../grammar';
import { grammarFor, GRAMMAR_SPECS } from '../grammars';
import {
  languageSupport,
  mimeFor,
  streamParser,
  TOKEN_TAGS
} from '../languages';

function classesOf(language: string, text: string): Map<string, string> {
  const support = languageSupport(language)!;
  const tree = support.language.parser.parse(text);
  const found = new Map<string, string>();
  highlightTree(tree, classHighlighter, (from, to, classes) => {
    found.set(text.slice(from, to), classes);
  });
  return found;
}

describe('CodeMirror languages', () => {
  it('map every token class to tags CodeMirror knows', () => {
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    const text = Object.values({
      mlir: '%0 = tt.load %1 : tensor<128x!tt.ptr<f32>> loc(#loc1)',
      ptx: '@%p1 ld.global.v4.b32 {%r1}, [%rd1]; // x',
      sass: '/*0040*/ @P0 LDG.E R2, desc[UR4][R2.64] ; /* 0x1 */'
    }).join('\n');
    for (const name of Object.keys(GRAMMAR_SPECS)) {
      classesOf(name, text);
    }
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
    expect(Object.keys(TOKEN_TAGS).sort()).toEqual(
      [
        'attribute',
        'comment',
        'dialect',
        'directive',
        'keyword',
        'label',
        'location',
        'meta',
        'modifier',
        'number',
        'op',
        'operator',
        'punctuation',
        'special',
        'string',
        'symbol',
        'type',
        'variable'
      ].sort()
    );
  });

  it('highlight MLIR ops, types and values', () => {
    const classes = classesOf('mlir', '    %9 = tt.load %8 : tensor<128xf32>');
    expect(classes.get('.load')).toBe('tok-keyword');
    expect(classes.get('tt')).toBe('tok-namespace');
    expect(classes.get('%9')).toBe('tok-variableName');
    expect(classes.get('tensor')).toBe('tok-typeName');
    expect(classes.get('128x')).toBe('tok-number');
  });

  it('highlight PTX and SASS opcodes', () => {
    expect(classesOf('ptx', '\tmov.u32 %r1, %tid.x;').get('mov')).toBe(
      'tok-keyword'
    );
    expect(
      classesOf('sass', '        /*0000*/   LDC R1, c[0x0][0x28] ;').get('LDC')
    ).toBe('tok-keyword');
  });

  it('tokenize through StringStream as tokenizeLine does', () => {
    const lines = [
      '\tld.global.v4.b32 { %r1, %r2 }, [ %rd1 + 0 ]; // load',
      '  %c128_i32 = arith.constant 128 : i32 loc(#loc1)',
      '        /*0080*/                   ISETP.GE.AND P0, PT, R0, UR4, PT ;'
    ];
    for (const language of ['ptx', 'mlir', 'sass']) {
      const grammar = grammarFor(language)!;
      const parser = streamParser(grammar);
      for (const line of lines) {
        const state = parser.startState!(4);
        const stream = new StringStream(line, 4, 2);
        const viaStream: [string | null, string][] = [];
        while (!stream.eol()) {
          const start = stream.pos;
          const tag = parser.token(stream, state);
          viaStream.push([tag, line.slice(start, stream.pos)]);
        }
        const direct = tokenizeLine(grammar, line, startState());
        const expected: [string | null, string][] = [];
        for (const [cls, text] of direct) {
          const tag = cls ? TOKEN_TAGS[cls] : null;
          const last = expected[expected.length - 1];
          if (last && last[0] === tag) {
            last[1] += text;
          } else {
            expected.push([tag, text]);
          }
        }
        const merged: [string | null, string][] = [];
        for (const [tag, text] of viaStream) {
          const last = merged[merged.length - 1];
          if (last && last[0] === tag) {
            last[1] += text;
          } else {
            merged.push([tag, text]);
          }
        }
        expect(merged).toEqual(expected);
      }
    }
  });

  it('know their mime types', () => {
    expect(mimeFor('mlir')).toBe('text/x-mlir');
    expect(mimeFor('ttgir')).toBe('text/x-mlir');
    expect(mimeFor('sass')).toBe('text/x-nvidia-sass');
    expect(mimeFor('fortran')).toBe('text/plain');
    expect(languageSupport('fortran')).toBeNull();
  });
});
