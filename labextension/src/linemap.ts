/**
 * Line links between a derived text (jaxpr, MLIR, PTX ...) and the source
 * lines it came from, and the request the inspector sends to open such a
 * text in its own tab. Pure logic: no DOM, no JupyterLab.
 */

import type {
  IOpenTextRequest,
  IOpenTextSource,
  SourceMapEntry
} from './contracts';

export type { IOpenTextRequest, SourceMapEntry };

/** A window of one source file, as an open-text request carries it. */
export type ISourceWindow = IOpenTextSource;

/** The languages an open-text request may name. */
export const TEXT_LANGUAGES = [
  'mlir',
  'ptx',
  'sass',
  'llvm',
  'llo',
  'hlo',
  'jaxpr'
] as const;
export type TextLanguage = (typeof TEXT_LANGUAGES)[number];

/**
 * The event the inspector dispatches (bubbling, composed) for "Open in new tab";
 * its detail is an `IOpenTextRequest` (the contracts' `OpenTextRequest`).
 */
export const OPEN_TEXT_EVENT = 'pallaslab:open-text';

/** The number of link colours the views cycle through. */
export const LINK_COLOURS = 8;

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value);
}

/**
 * Checks an open-text request from the page and returns a clean copy.
 *
 * Anything on the page can dispatch the event, so nothing is trusted: fields
 * of the wrong type are an error, map entries that point nowhere are dropped.
 *
 * @throws Error naming the first malformed field.
 */
export function parseOpenTextRequest(detail: unknown): IOpenTextRequest {
  if (typeof detail !== 'object' || detail === null) {
    throw new Error('the request is not an object');
  }
  const raw = detail as { [key: string]: unknown };
  if (typeof raw.text !== 'string') {
    throw new Error('text must be a string');
  }
  const title =
    typeof raw.title === 'string' && raw.title.trim()
      ? raw.title
      : 'pallaslab text';
  const language =
    typeof raw.language === 'string' ? raw.language.toLowerCase() : '';
  const sources: ISourceWindow[] = [];
  if (raw.sources !== undefined && raw.sources !== null) {
    if (!Array.isArray(raw.sources)) {
      throw new Error('sources must be a list');
    }
    for (const [index, source] of raw.sources.entries()) {
      const s = (source ?? {}) as { [key: string]: unknown };
      if (
        !Array.isArray(s.lines) ||
        !s.lines.every(line => typeof line === 'string')
      ) {
        throw new Error(`sources[${index}].lines must be a list of strings`);
      }
      sources.push({
        label: typeof s.label === 'string' ? s.label : `source ${index + 1}`,
        first: isInteger(s.first) && s.first >= 1 ? s.first : 1,
        lines: s.lines as string[]
      });
    }
  }
  const sourceMap: SourceMapEntry[] = [];
  if (raw.sourceMap !== undefined && raw.sourceMap !== null) {
    if (!Array.isArray(raw.sourceMap)) {
      throw new Error('sourceMap must be a list');
    }
    for (const entry of raw.sourceMap) {
      if (
        Array.isArray(entry) &&
        entry.length >= 3 &&
        isInteger(entry[0]) &&
        isInteger(entry[1]) &&
        isInteger(entry[2]) &&
        entry[0] >= 1 &&
        entry[1] >= 0 &&
        entry[1] < sources.length
      ) {
        sourceMap.push([entry[0], entry[1], entry[2]]);
      }
    }
  }
  return { title, language, text: raw.text, sourceMap, sources };
}

/** A source line: which source and which line of it. */
export interface ISourceLine {
  source: number;
  line: number;
}

/**
 * Two-way lookups between text lines and source lines, with a stable colour
 * per source line (Compiler Explorer style).
 */
export class LineLinks {
  constructor(sourceMap: SourceMapEntry[], sources: ISourceWindow[]) {
    this.sources = sources;
    for (const [textLine, source, sourceLine] of sourceMap) {
      const key = `${source}:${sourceLine}`;
      if (!this._colours.has(key)) {
        this._colours.set(key, this._colours.size);
      }
      if (!this._textToSource.has(textLine)) {
        this._textToSource.set(textLine, { source, line: sourceLine });
      }
      let lines = this._sourceToText.get(key);
      if (!lines) {
        lines = [];
        this._sourceToText.set(key, lines);
      }
      if (lines[lines.length - 1] !== textLine) {
        lines.push(textLine);
      }
    }
    for (const lines of this._sourceToText.values()) {
      lines.sort((a, b) => a - b);
    }
  }

  readonly sources: ISourceWindow[];

  /** The source line a text line comes from (the first, when several). */
  sourceOf(textLine: number): ISourceLine | null {
    return this._textToSource.get(textLine) ?? null;
  }

  /** The text lines that come from a source line, ascending. */
  textLinesOf(source: number, line: number): number[] {
    return this._sourceToText.get(`${source}:${line}`) ?? [];
  }

  /** The source lines with any text line, per source, ascending. */
  linkedSourceLines(source: number): number[] {
    const lines: number[] = [];
    for (const key of this._sourceToText.keys()) {
      const [s, line] = key.split(':').map(Number);
      if (s === source) {
        lines.push(line);
      }
    }
    return lines.sort((a, b) => a - b);
  }

  /** The colour index (0 .. LINK_COLOURS-1) of a text line; null when unlinked. */
  colourOfText(textLine: number): number | null {
    const where = this._textToSource.get(textLine);
    return where ? this.colourOfSource(where.source, where.line) : null;
  }

  /** The colour index of a source line; null when no text line comes from it. */
  colourOfSource(source: number, line: number): number | null {
    const index = this._colours.get(`${source}:${line}`);
    return index === undefined ? null : index % LINK_COLOURS;
  }

  /** Every linked text line with its colour, ascending. */
  colouredTextLines(): [number, number][] {
    const result: [number, number][] = [];
    for (const [textLine, where] of this._textToSource) {
      result.push([
        textLine,
        this.colourOfSource(where.source, where.line) ?? 0
      ]);
    }
    return result.sort((a, b) => a[0] - b[0]);
  }

  /** The text of a source line, when its window includes it. */
  sourceText(source: number, line: number): string | null {
    const window = this.sources[source];
    if (!window) {
      return null;
    }
    const text = window.lines[line - window.first];
    return text === undefined ? null : text;
  }

  /** "Cell [3] line 7" for a source line. */
  describe(where: ISourceLine): string {
    const label =
      this.sources[where.source]?.label ?? `source ${where.source + 1}`;
    return /^Cell\b/.test(label)
      ? `${label} line ${where.line}`
      : `${label}:${where.line}`;
  }

  private _textToSource = new Map<number, ISourceLine>();
  private _sourceToText = new Map<string, number[]>();
  private _colours = new Map<string, number>();
}

/** The execution count in a cell label ("Cell [12]" -> 12), or null. */
export function cellNumber(label: string): number | null {
  const match = /^Cell \[(\d+)\]$/.exec(label.trim());
  return match ? Number(match[1]) : null;
}

/** A notebook cell as the matcher sees it. */
export interface ICellText {
  source: string;
  executionCount: number | null;
}

/** Which cell a source window is, and whether the cell changed since. */
export interface ICellMatch {
  index: number;
  /** The cell's text no longer matches the window: lines may have moved. */
  stale: boolean;
}

function normalise(line: string): string {
  return line.replace(/\s+/g, ' ').trim();
}

function windowMatches(window: ISourceWindow, cellSource: string): boolean {
  const cellLines = cellSource.split('\n');
  const start = window.first - 1;
  if (start < 0 || start + window.lines.length > cellLines.length + 1) {
    return false;
  }
  return window.lines.every(
    (line, k) => normalise(cellLines[start + k] ?? '') === normalise(line)
  );
}

/**
 * Finds the notebook cell a source window was taken from.
 *
 * A cell whose text still matches wins, preferring the one whose execution
 * count the label names (two cells can hold the same code); failing that, the
 * cell the label names, flagged stale (the user edited it since).
 *
 * @returns The match, or null when no cell is the source.
 */
export function matchCell(
  window: ISourceWindow,
  cells: ICellText[]
): ICellMatch | null {
  const number = cellNumber(window.label);
  let byContent = -1;
  let byNumber = -1;
  cells.forEach((cell, index) => {
    const numbered = number !== null && cell.executionCount === number;
    if (numbered && byNumber < 0) {
      byNumber = index;
    }
    if (windowMatches(window, cell.source)) {
      if (byContent < 0 || numbered) {
        byContent = numbered ? index : byContent < 0 ? index : byContent;
      }
    }
  });
  if (byContent >= 0) {
    return { index: byContent, stale: false };
  }
  if (byNumber >= 0) {
    return { index: byNumber, stale: true };
  }
  return null;
}
