"""TPU checks that need no compiler: the (8, 128) block rule and VMEM use.

Pallas on TPU lays blocks out in VMEM in tiles of 8 sublanes x 128 lanes, and asks
that the last two dimensions of a block be multiples of (8, 128) or span the whole
array dimension (rank-1 blocks have their own rule). These checks read only the
`Kernel` record, so they run before any lowering and point at the BlockSpec line.
"""

from __future__ import annotations

import math

import numpy as np

from pallaslab._src.geometry.hints import blockspec_line
from pallaslab._src.records import Kernel, Operand
from pallaslab._src.records.lowered import BlockVmem, TilingProblem

SUBLANES = 8
LANES = 128
# Memory spaces whose blocks live in VMEM ("default" is VMEM on TPU).
_VMEM_SPACES = frozenset({"default", "vmem"})


def _block_dims(operand: Operand) -> tuple[int, ...]:
    """The block with squeezed dimensions as 1, as Pallas checks it."""
    return tuple(1 if b is None else int(b) for b in operand.block_shape)


def _bits(dtype: str) -> int:
    if dtype == "bool":
        return 32  # Mosaic stores booleans as 32-bit values in memory
    try:
        return int(np.dtype(dtype).itemsize * 8)
    except TypeError:
        return 32


def _needs_tiling(operand: Operand) -> bool:
    if operand.role == "scratch" or operand.scalar_prefetch or not operand.block_shape:
        return False
    if operand.memory_space == "smem":
        # Pallas skips SMEM blocks that are the whole array.
        return _block_dims(operand) != tuple(operand.shape)
    return operand.memory_space in _VMEM_SPACES


def tiling_problems(kernel: Kernel) -> list[TilingProblem]:
    """Blocks of `kernel` that break the TPU (8, 128) rule, with how to fix them."""
    problems = []
    for operand in kernel.operands:
        if not _needs_tiling(operand):
            continue
        problem = _check(operand)
        if problem is not None:
            message, hint = problem
            problems.append(TilingProblem(operand.label, message, hint, blockspec_line(operand)))
    return problems


def _check(operand: Operand) -> tuple[str, str] | None:
    block = _block_dims(operand)
    shape = tuple(operand.shape)
    name = f"{operand.label} (block {_fmt(operand.block_shape)} of {_fmt(shape)})"
    if len(block) >= 2:
        lanes, rows = block[-1], block[-2]
        lanes_ok = lanes == shape[-1] or lanes % LANES == 0
        rows_ok = rows == shape[-2] or rows % SUBLANES == 0
        if lanes_ok and rows_ok:
            return None
        broken = []
        if not lanes_ok:
            broken.append(
                f"its last dimension {lanes} is neither a multiple of {LANES} nor the "
                f"array's {shape[-1]}"
            )
        if not rows_ok:
            squeezed = operand.block_shape[-2] is None
            what = "squeezed (one row)" if squeezed else str(rows)
            broken.append(
                f"its second-to-last dimension {what} is neither a multiple of {SUBLANES} "
                f"nor the array's {shape[-2]}"
            )
        suggestion = (
            *block[:-2],
            rows if rows_ok else _suggest(rows, shape[-2], SUBLANES),
            lanes if lanes_ok else _suggest(lanes, shape[-1], LANES),
        )
        return (
            f"{name} breaks the TPU tiling rule: {'; '.join(broken)}.",
            "TPU blocks are laid out in (8, 128) tiles: make the last two block "
            "dimensions multiples of 8 and 128, or the whole array dimension, e.g. "
            f"a block of {_fmt(suggestion)} (and a grid to match).",
        )
    (size,) = block
    packing = max(32 // _bits(operand.dtype), 1)
    chunk = SUBLANES * LANES
    minimum = LANES * packing
    if size == shape[0] or size % chunk == 0 or (size >= minimum and size & (size - 1) == 0):
        return None
    return (
        f"{name} breaks the TPU tiling rule for 1-D blocks: {size} is not the array's "
        f"{shape[0]}, not a multiple of {chunk}, and not a power of 2 of at least {minimum}.",
        f"Use a 1-D block of the whole array, a multiple of {chunk}, or a power of 2 "
        f"of at least {minimum} (e.g. {_suggest(size, shape[0], chunk)}).",
    )


def _suggest(size: int, whole: int, unit: int) -> int:
    """The nearest block size that keeps the rule: a multiple of `unit`, or `whole`."""
    rounded = max(unit, round(size / unit) * unit)
    return whole if rounded >= whole else rounded


def _fmt(dims: tuple[int | None, ...]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def padded_bytes(dims: tuple[int, ...], dtype: str) -> int:
    """Bytes of an array laid out in VMEM tiles.

    Rows are rounded up to 8 sublanes of packed 32-bit words, lanes to 128.
    """
    bits = _bits(dtype)
    if not dims:
        return math.ceil(bits / 8)
    packing = max(32 // bits, 1)
    lanes = math.ceil(dims[-1] / LANES) * LANES
    rows = dims[-2] if len(dims) >= 2 else 1
    rows = math.ceil(rows / (SUBLANES * packing)) * SUBLANES * packing
    lead = math.prod(dims[:-2]) if len(dims) > 2 else 1
    return lead * rows * lanes * bits // 8


def vmem_blocks(kernel: Kernel) -> list[BlockVmem]:
    """The VMEM each operand's blocks (double-buffered) and each scratch buffer take."""
    found = []
    for operand in kernel.operands:
        if operand.scalar_prefetch or operand.memory_space not in _VMEM_SPACES:
            continue
        dims = _block_dims(operand)
        try:
            itemsize = np.dtype(operand.dtype).itemsize
        except TypeError:
            continue  # semaphores and other non-array scratch
        # Pallas' TPU pipeline keeps two copies of each block (one in flight).
        buffers = 1 if operand.role == "scratch" else (operand.buffer_count or 2)
        found.append(
            BlockVmem(
                operand=operand.label,
                role=operand.role,
                block_shape=dims,
                dtype=operand.dtype,
                buffers=buffers,
                bytes=buffers * math.prod(dims) * int(itemsize),
                padded_bytes=buffers * padded_bytes(dims, operand.dtype),
            )
        )
    return found
