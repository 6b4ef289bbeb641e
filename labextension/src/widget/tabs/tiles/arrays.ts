/**
 * The Tiles tab's arithmetic: compact arrays decoded from the model (base64 typed
 * arrays, kept only along the grid axes they vary on), colours, grid positions.
 * No DOM here (unit-tested in node).
 */

import type { IEncodedArray } from '../../../contracts';
import { TILE_COLOURS } from '../../../contracts';

const TYPED = {
  u8: Uint8Array,
  u16: Uint16Array,
  i16: Int16Array,
  u32: Uint32Array,
  i32: Int32Array,
  f64: Float64Array
};

/** A decoded array: its values (row-major), shape and strides. */
export interface IArray {
  data: ArrayLike<number>;
  shape: number[];
  strides: number[];
}

/** Decodes base64 little-endian data of the narrowest integer type. */
export function decode(encoded: IEncodedArray): IArray {
  const text = atob(encoded.data);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    bytes[i] = text.charCodeAt(i);
  }
  const data = new TYPED[encoded.dtype](bytes.buffer);
  const shape = encoded.shape;
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let a = shape.length - 1; a >= 0; a--) {
    strides[a] = step;
    step *= shape[a];
  }
  return { data, shape, strides };
}

/** The value for one program of an array kept only along the axes it varies on. */
export function at(array: IArray, index: number[]): number {
  let k = 0;
  for (let a = 0; a < array.shape.length; a++) {
    if (array.shape[a] > 1) {
      k += index[a] * array.strides[a];
    }
  }
  return array.data[k];
}

/** The colour of a cell read (or written) by `count` programs, `peak` the most. */
export function shade(role: string, count: number, peak: number): string {
  if (count <= 0) {
    return TILE_COLOURS.unread;
  }
  const [light, dark] =
    role === 'in' || role === 'out' || role === 'prefetch'
      ? TILE_COLOURS[role]
      : TILE_COLOURS.other;
  // Read once: a quarter of the way to the darkest shade, kept for the busiest.
  const t = 0.25 + 0.6 * (peak > 1 ? (count - 1) / (peak - 1) : 0);
  const channel = (i: number) =>
    Math.round(
      parseInt(light.slice(i, i + 2), 16) * (1 - t) +
        parseInt(dark.slice(i, i + 2), 16) * t
    );
  return `rgb(${[1, 3, 5].map(channel).join(',')})`;
}

/** The grid index of the program at a row-major position. */
export function unravel(position: number, grid: number[]): number[] {
  const index = new Array<number>(grid.length);
  for (let a = grid.length - 1; a >= 0; a--) {
    index[a] = position % grid[a];
    position = Math.floor(position / grid[a]);
  }
  return index;
}

/** "(1, 2)", "(3,)". */
export function programText(index: number[]): string {
  return `(${index.join(', ')}${index.length === 1 ? ',' : ''})`;
}

/** The cell [edges[i], edges[i+1]) that holds `value` (clipped to the array). */
export function search(edges: ArrayLike<number>, value: number): number {
  let lo = 0;
  let hi = edges.length - 2;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (edges[mid] <= value) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}
