import {
  cellNumber,
  LineLinks,
  LINK_COLOURS,
  matchCell,
  parseOpenTextRequest,
  SourceMapEntry
} from '../linemap';

const cellSource = [
  '%%kernel add(x, y) --ref "x + y"',
  'import jax',
  'def add_kernel(x_ref, y_ref, o_ref):',
  '    o_ref[...] = x_ref[...] + y_ref[...]'
];
const sources = [
  { label: 'Cell [2]', first: 1, lines: cellSource },
  { label: 'corpus.py', first: 10, lines: ['def f():', '    return 1'] }
];
const map: SourceMapEntry[] = [
  [3, 0, 4],
  [4, 0, 4],
  [5, 0, 3],
  [9, 1, 11],
  [7, 0, 4]
];

describe('parseOpenTextRequest', () => {
  it('keeps a well-formed request', () => {
    const request = parseOpenTextRequest({
      title: 'kernel add',
      language: 'MLIR',
      text: 'a\nb',
      sourceMap: map,
      sources
    });
    expect(request.title).toBe('kernel add');
    expect(request.language).toBe('mlir');
    expect(request.sourceMap).toEqual(map);
    expect(request.sources[1]).toEqual(sources[1]);
  });

  it('rejects what is not a request, naming the field', () => {
    expect(() => parseOpenTextRequest(null)).toThrow('not an object');
    expect(() => parseOpenTextRequest({ title: 'x' })).toThrow(
      'text must be a string'
    );
    expect(() => parseOpenTextRequest({ text: '', sources: 'no' })).toThrow(
      'sources must be a list'
    );
    expect(() =>
      parseOpenTextRequest({ text: '', sources: [{ lines: [1] }] })
    ).toThrow('sources[0].lines');
    expect(() => parseOpenTextRequest({ text: '', sourceMap: {} })).toThrow(
      'sourceMap must be a list'
    );
  });

  it('drops map entries that point nowhere and fills defaults', () => {
    const request = parseOpenTextRequest({
      text: 'x',
      sourceMap: [
        [1, 0, 4],
        [2, 5, 1],
        [0, 0, 1],
        ['1', 0, 1],
        [3, 0, 2.5],
        [4, 0, 1, 'extra']
      ],
      sources: [{ lines: ['a'], first: -3 }]
    });
    expect(request.sourceMap).toEqual([
      [1, 0, 4],
      [4, 0, 1]
    ]);
    expect(request.title).toBe('pallaslab text');
    expect(request.sources[0]).toEqual({
      label: 'source 1',
      first: 1,
      lines: ['a']
    });
  });
});

describe('LineLinks', () => {
  const links = new LineLinks(map, sources);

  it('looks up both ways', () => {
    expect(links.sourceOf(3)).toEqual({ source: 0, line: 4 });
    expect(links.sourceOf(9)).toEqual({ source: 1, line: 11 });
    expect(links.sourceOf(1)).toBeNull();
    expect(links.textLinesOf(0, 4)).toEqual([3, 4, 7]);
    expect(links.textLinesOf(0, 3)).toEqual([5]);
    expect(links.textLinesOf(0, 99)).toEqual([]);
    expect(links.linkedSourceLines(0)).toEqual([3, 4]);
  });

  it('gives each source line its own colour, shared by its text lines', () => {
    expect(links.colourOfText(3)).toBe(links.colourOfText(4));
    expect(links.colourOfText(3)).toBe(links.colourOfSource(0, 4));
    expect(links.colourOfText(5)).not.toBe(links.colourOfText(3));
    expect(links.colourOfText(1)).toBeNull();
    expect(links.colouredTextLines().map(([line]) => line)).toEqual([
      3, 4, 5, 7, 9
    ]);
    const many = new LineLinks(
      Array.from({ length: 20 }, (_, k): SourceMapEntry => [k + 1, 0, k + 1]),
      sources
    );
    for (let k = 1; k <= 20; k++) {
      const colour = many.colourOfText(k)!;
      expect(colour).toBeGreaterThanOrEqual(0);
      expect(colour).toBeLessThan(LINK_COLOURS);
    }
  });

  it('describes source lines and finds their text', () => {
    expect(links.describe({ source: 0, line: 4 })).toBe('Cell [2] line 4');
    expect(links.describe({ source: 1, line: 11 })).toBe('corpus.py:11');
    expect(links.sourceText(0, 4)).toBe(cellSource[3]);
    expect(links.sourceText(1, 11)).toBe('    return 1');
    expect(links.sourceText(1, 9)).toBeNull();
    expect(links.sourceText(7, 1)).toBeNull();
  });

  it('stays fast on a 100k-line map', () => {
    const big: SourceMapEntry[] = Array.from({ length: 100_000 }, (_, k) => [
      k + 1,
      0,
      (k % 4) + 1
    ]);
    const start = Date.now();
    const bigLinks = new LineLinks(big, sources);
    expect(bigLinks.textLinesOf(0, 1).length).toBe(25_000);
    expect(Date.now() - start).toBeLessThan(2000);
  });
});

describe('matchCell', () => {
  const cells = [
    { source: '%load_ext pallaslab', executionCount: 1 },
    { source: cellSource.join('\n'), executionCount: 5 },
    { source: cellSource.join('\n') + '\n', executionCount: 2 }
  ];

  it('reads cell labels', () => {
    expect(cellNumber('Cell [12]')).toBe(12);
    expect(cellNumber('corpus.py')).toBeNull();
  });

  it('prefers the cell whose text matches and whose number the label names', () => {
    expect(matchCell(sources[0], cells)).toEqual({ index: 2, stale: false });
  });

  it('falls back on the text alone, ignoring spacing', () => {
    const renumbered = [
      cells[0],
      {
        source: cellSource.join('\n').replace('add(x, y)', 'add(x,  y)'),
        executionCount: 9
      }
    ];
    expect(matchCell(sources[0], renumbered)).toEqual({
      index: 1,
      stale: false
    });
  });

  it('marks a numbered cell whose text changed as stale', () => {
    const edited = [cells[0], { source: 'something else', executionCount: 2 }];
    expect(matchCell(sources[0], edited)).toEqual({ index: 1, stale: true });
  });

  it('finds windows inside cells, and nothing for other files', () => {
    const window = {
      label: '1234.py',
      first: 3,
      lines: cellSource.slice(2, 4)
    };
    expect(matchCell(window, cells)?.index).toBe(1);
    expect(matchCell(sources[1], cells)).toBeNull();
  });
});
