"""Where an output differs from its reference: element by element, then per block.

Pure NumPy. `element_errors` compares one output with its reference within a
tolerance fit for its dtype (`tolerance_for`); `locate` counts the mismatches per
block of the kernel's output tiling and names the programs that write those blocks,
so a wrong last row of blocks is one look, not a search. The core's one comparison
(`core/comparison.py`) puts them together for a run's outputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from pallaslab._src.geometry.blocks import block_starts
from pallaslab._src.records import Operand, TileMismatch
from pallaslab._src.records.mosaic_gpu import CopyWindows

# (rtol, atol relative to the reference's largest magnitude), by dtype: bf16 keeps 8
# significant bits, f16 11, f32 24, FP8 e4m3 4 and e5m2 3; integer and boolean
# outputs must match exactly.
_TOLERANCES: dict[str, tuple[float, float]] = {
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e4m3fnuz": (1.25e-1, 1.25e-1),
    "float8_e4m3b11fnuz": (1.25e-1, 1.25e-1),
    "float8_e4m3": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
    "float8_e5m2fnuz": (2.5e-1, 2.5e-1),
    "float8_e8m0fnu": (5e-1, 5e-1),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float16": (2e-3, 2e-3),
    "float32": (2e-5, 2e-5),
    "float64": (1e-9, 1e-9),
    "complex64": (2e-5, 2e-5),
    "complex128": (1e-9, 1e-9),
}


def tolerance_for(dtype: str) -> tuple[float, float]:
    """(rtol, atol scale) fit for comparing outputs of this dtype: bf16 is not f32.

    Integers and booleans must match exactly.
    """
    return _TOLERANCES.get(dtype, (0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class ElementErrors:
    """An element-wise comparison of one output with its reference.

    Attributes:
        bad: True where the output is outside tolerance (NaN where the reference is
            not NaN counts as outside).
        nonfinite: True where the output is NaN or Inf but the reference is finite.
        atol: The absolute tolerance used (scaled by the reference's magnitude).
        rtol: The relative tolerance used.
        max_abs_err: Largest absolute difference (0 where both are NaN or the same
            infinity; inf where exactly one is NaN).
        max_rel_err: Largest difference relative to the reference's magnitude.
        nan_count: NaN elements in the output where the reference is not NaN.
        inf_count: Infinite elements in the output where the reference is finite.
        reference_nonfinite: NaN or Inf elements in the reference.
    """

    bad: np.ndarray
    nonfinite: np.ndarray
    atol: float
    rtol: float
    max_abs_err: float
    max_rel_err: float
    nan_count: int
    inf_count: int
    reference_nonfinite: int


#: Elements compared at once: the float64 temporaries of a comparison stay this size
#: whatever the output's (a 1 GiB output is compared in pieces, not in 8 GiB of copies).
CHUNK_ELEMENTS = 1 << 20


def _chunks(size: int) -> range:
    return range(0, size, CHUNK_ELEMENTS)


def element_errors(
    out: np.ndarray, ref: np.ndarray, rtol: float, atol_scale: float
) -> ElementErrors:
    """Compares `out` with `ref` element by element.

    The tolerance is `atol + rtol * |ref|` with `atol = atol_scale * max|ref|` (over
    the reference's finite elements), so outputs of
    kernels that accumulate are compared relative to the output's scale, not to
    each element's (a sum that cancels to near zero is not "wrong by 100%").

    Computed `CHUNK_ELEMENTS` at a time: beyond the two boolean masks it returns, it
    needs memory for one chunk, not copies of the whole output.
    """
    wide = np.complex128 if out.dtype.kind == "c" or ref.dtype.kind == "c" else np.float64
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    magnitude = 0.0
    for start in _chunks(flat_ref.size):
        want = flat_ref[start : start + CHUNK_ELEMENTS].astype(wide)
        finite = np.abs(want[np.isfinite(want)])
        if finite.size:
            magnitude = max(magnitude, float(finite.max()))
    atol = atol_scale * (magnitude if flat_ref.size and _any_finite(flat_ref, wide) else 1.0)
    bad = np.empty(flat_out.shape, bool)
    nonfinite = np.empty(flat_out.shape, bool)
    max_abs = max_rel = 0.0
    nan_count = inf_count = reference_nonfinite = 0
    for start in _chunks(flat_out.size):
        piece = slice(start, start + CHUNK_ELEMENTS)
        got, want = flat_out[piece].astype(wide), flat_ref[piece].astype(wide)
        finite_ref = np.isfinite(want)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(got - want)
        both_nan = np.isnan(got) & np.isnan(want)
        same_inf = np.isinf(got) & (got == want)
        diff = np.where(both_nan | same_inf, 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(np.nan_to_num(want))
        bad[piece] = diff > atol + rtol * scale
        nonfinite[piece] = ~np.isfinite(got) & finite_ref
        nonzero = scale > 0
        if diff.size:
            max_abs = max(max_abs, float(diff.max()))
        if nonzero.any():
            max_rel = max(max_rel, float((diff[nonzero] / scale[nonzero]).max()))
        nan_count += int((np.isnan(got) & ~np.isnan(want)).sum())
        inf_count += int((np.isinf(got) & finite_ref).sum())
        reference_nonfinite += int((~finite_ref).sum())
    return ElementErrors(
        bad=bad.reshape(out.shape),
        nonfinite=nonfinite.reshape(out.shape),
        atol=atol,
        rtol=rtol,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        nan_count=nan_count,
        inf_count=inf_count,
        reference_nonfinite=reference_nonfinite,
    )


def _any_finite(flat: np.ndarray, wide: type) -> bool:
    return any(
        bool(np.isfinite(flat[start : start + CHUNK_ELEMENTS].astype(wide)).any())
        for start in _chunks(flat.size)
    )


# Beyond this many programs, an index map with element offsets is not walked program
# by program (blocked index maps are looked up directly at any size).
_MAX_PROGRAMS_WALKED = 1 << 16


def tile_shape_of(operand: Operand | None, shape: Sequence[int]) -> tuple[int, ...]:
    """The tile an output is cut into: its block shape, squeezed dimensions as 1.

    Without an operand (no kernel writes the output), the whole output is one tile.
    """
    if operand is None or len(operand.block_shape) != len(shape):
        return tuple(max(int(s), 1) for s in shape)
    return tuple(1 if b is None else max(int(b), 1) for b in operand.block_shape)


def per_tile(mask: np.ndarray, tile: Sequence[int]) -> np.ndarray:
    """How many True elements of `mask` fall in each tile (edge tiles may be partial).

    Counted a slab of tile rows at a time: the padded copy it sums is one slab's.
    """
    if mask.ndim == 0:
        return mask.astype(np.int64).reshape(())
    tiles = [math.ceil(s / t) if s else 0 for s, t in zip(mask.shape, tile, strict=True)]
    counts = np.zeros(tiles, dtype=np.int64)
    row_elements = max(1, math.prod(mask.shape[1:]) * int(tile[0]))
    rows_at_once = max(1, CHUNK_ELEMENTS // row_elements)  # tile rows a slab
    for first in range(0, tiles[0], rows_at_once):
        last = min(tiles[0], first + rows_at_once)
        slab = mask[first * tile[0] : last * tile[0]]
        padded = np.zeros(
            [(last - first) * tile[0], *(n * t for n, t in zip(tiles[1:], tile[1:], strict=True))],
            dtype=bool,
        )
        padded[tuple(slice(0, s) for s in slab.shape)] = slab
        split = [last - first, tile[0]]
        split += [d for pair in zip(tiles[1:], tile[1:], strict=True) for d in pair]
        counts[first:last] = padded.reshape(split).sum(
            axis=tuple(range(1, 2 * mask.ndim, 2)), dtype=np.int64
        )
    return counts


def locate(
    errors: ElementErrors,
    *,
    output: str,
    operand: Operand | None,
    grid: Sequence[int] = (),
    kernel: str = "",
    prefetch: Sequence[np.ndarray] = (),
    note: str = "",
) -> TileMismatch:
    """Counts mismatches per output block and finds the programs that write them.

    Args:
        errors: The element-wise comparison of the output.
        output: The output's path among the results.
        operand: The kernel's output operand that writes it (None when no kernel
            does; the whole output is then one tile).
        grid: The kernel's grid.
        kernel: The kernel's name.
        prefetch: Scalar-prefetch values, for index maps that read them.
        note: Something to say about how the output was matched to its kernel.
    """
    shape = tuple(int(s) for s in errors.bad.shape)
    tile = tile_shape_of(operand, shape)
    counts = per_tile(errors.bad, tile)
    nonfinite = per_tile(errors.nonfinite, tile)
    bad_tiles = tuple(tuple(int(v) for v in idx) for idx in np.argwhere(counts > 0))
    programs: tuple[tuple[int, ...], ...] = ()
    notes = [note] if note else []
    if operand is not None and bad_tiles:
        found, why = _bad_programs(
            counts, errors.bad, operand, grid=tuple(grid), tile=tile, prefetch=prefetch
        )
        programs = found
        if why:
            notes.append(why)
    return TileMismatch(
        output=output,
        shape=shape,
        tile_shape=tile,
        counts=counts,
        nonfinite=nonfinite,
        bad_tiles=bad_tiles,
        bad_programs=programs,
        kernel=kernel,
        operand=operand.label if operand is not None else "",
        grid=tuple(grid),
        nan_count=errors.nan_count,
        inf_count=errors.inf_count,
        reference_nonfinite=errors.reference_nonfinite,
        pattern=describe(bad_tiles, tuple(counts.shape)),
        note=" ".join(notes),
    )


def locate_windows(
    errors: ElementErrors,
    *,
    output: str,
    operand: Operand,
    windows: CopyWindows,
    grid: Sequence[int],
    kernel: str = "",
    note: str = "",
) -> TileMismatch | None:
    """`locate` for a kernel without BlockSpecs: the tiles are the windows its stores write.

    A Mosaic GPU mesh kernel (`plgpu.kernel`) writes its output with copies or stores of
    windows it picks itself; when they all have one shape and start on multiples of it,
    that shape tiles the output, and the CTAs whose windows hold a mismatch are the bad
    programs. None when the windows do not tile the output (the caller falls back).

    Args:
        errors: The element-wise comparison of the output.
        output: The output's path among the results.
        operand: The kernel's output operand.
        windows: Where that operand's writes land, per CTA and step.
        grid: The CTAs' grid the windows are laid over.
        kernel: The kernel's name.
        note: Something to say about how the output was matched to its kernel.
    """
    shape = tuple(int(s) for s in errors.bad.shape)
    tile = tuple(int(s) for s in windows.sizes)
    if windows.direction != "write" or len(tile) != len(shape) or not all(tile):
        return None
    if len(windows.starts) != len(shape) or math.prod(grid) != windows.starts[0].shape[0]:
        return None
    written = windows.lengths[0] > 0
    for start, length, size in zip(windows.starts, windows.lengths, tile, strict=True):
        if np.any(length[written] != size) or np.any(start[written] % size):
            return None
    counts = per_tile(errors.bad, tile)
    nonfinite = per_tile(errors.nonfinite, tile)
    bad_tiles = tuple(tuple(int(v) for v in idx) for idx in np.argwhere(counts > 0))
    hit = np.zeros(written.shape[0], dtype=bool)
    for cta, step in np.argwhere(written):
        index = tuple(
            int(start[cta, step]) // size for start, size in zip(windows.starts, tile, strict=True)
        )
        if all(i < n for i, n in zip(index, counts.shape, strict=True)) and counts[index] > 0:
            hit[cta] = True
    return TileMismatch(
        output=output,
        shape=shape,
        tile_shape=tile,
        counts=counts,
        nonfinite=nonfinite,
        bad_tiles=bad_tiles,
        bad_programs=_sorted(hit.reshape(tuple(grid))),
        kernel=kernel,
        operand=operand.label,
        grid=tuple(grid),
        nan_count=errors.nan_count,
        inf_count=errors.inf_count,
        reference_nonfinite=errors.reference_nonfinite,
        pattern=describe(bad_tiles, tuple(counts.shape)),
        note=note,
    )


def _bad_programs(
    counts: np.ndarray,
    bad: np.ndarray,
    operand: Operand,
    *,
    grid: tuple[int, ...],
    tile: tuple[int, ...],
    prefetch: Sequence[np.ndarray],
) -> tuple[tuple[tuple[int, ...], ...], str]:
    """Grid indices of the programs whose output block holds a mismatch."""
    index_map = operand.index_map
    if index_map is None or not index_map.evaluable:
        return (), "The output's index map could not be evaluated, so programs are not named."
    if index_map.uses_prefetch and not prefetch:
        return (), "The output's index map reads scalar-prefetch values not known here."
    if not grid or math.prod(grid) == 0:
        return (((),) if counts.any() else ()), ""
    starts = block_starts(operand, grid, prefetch)  # (*grid, ndim)
    extent = np.asarray(bad.shape, dtype=np.int64)
    tile_arr = np.asarray(tile, dtype=np.int64)
    inside = np.all((starts >= 0) & (starts < extent), axis=-1)
    aligned = np.all(starts % tile_arr == 0, axis=-1)
    hit = np.zeros(grid, dtype=bool)
    # Blocked dimensions start on tile boundaries: a program's block is one tile.
    fast = inside & aligned
    if fast.any():
        tiles_of = starts[fast] // tile_arr
        hit[fast] = counts[tuple(tiles_of.T)] > 0
    slow = np.argwhere(inside & ~aligned)
    if len(slow) > _MAX_PROGRAMS_WALKED:
        return _sorted(hit), (
            f"{len(slow)} programs have blocks off the tile boundaries; not all were checked."
        )
    for program in slow:
        start = starts[tuple(program)]
        window = tuple(slice(int(s), int(s) + int(t)) for s, t in zip(start, tile, strict=True))
        hit[tuple(program)] = bool(bad[window].any())
    return _sorted(hit), ""


def _sorted(hit: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in idx) for idx in np.argwhere(hit))


def describe(bad_tiles: Sequence[tuple[int, ...]], tiles: tuple[int, ...]) -> str:
    """The mismatch in words: "the last row of blocks", "block (2, 3)", "every block".

    Args:
        bad_tiles: Indices of the tiles that differ.
        tiles: How many tiles along each dimension.
    """
    total = math.prod(tiles)
    count = len(bad_tiles)
    if count == 0:
        return ""
    if count == total:
        return "every block" if total > 1 else "the only block"
    ndim = len(tiles)
    if ndim == 1:
        indices = sorted(t[0] for t in bad_tiles)
        last = tiles[0] - 1
        if indices == list(range(indices[0], indices[-1] + 1)):
            if count == 1:
                return _position(indices[0], last, "block", "block")
            if indices[-1] == last:
                return f"the last {count} blocks ({indices[0]}..{last})"
            if indices[0] == 0:
                return f"the first {count} blocks (0..{indices[-1]})"
            return f"blocks {indices[0]}..{indices[-1]}"
        return f"{count} of {total} blocks"
    if count == 1:
        return f"block {tuple(bad_tiles[0])}"
    for axis in range(ndim):
        values = {t[axis] for t in bad_tiles}
        if len(values) == 1 and count == total // tiles[axis]:
            (value,) = values
            noun = {0: "row", 1: "column"}.get(axis, "slab") if ndim == 2 else "slab"
            where = _position(value, tiles[axis] - 1, noun, noun)
            suffix = " of blocks" if ndim == 2 else f" of blocks along dimension {axis}"
            return where + suffix
    return f"{count} of {total} blocks"


def _position(value: int, last: int, noun: str, plain: str) -> str:
    if value == last:
        return f"the last {noun}"
    if value == 0:
        return f"the first {noun}"
    return f"{plain} {value}"
