"""Element-level loads and stores of one program, and what they add up to per block.

The core interprets a kernel body for one program (see
`core/jax_adapter/accesses.py`) and records every load and store lane by lane: the
element each lane touches (which may lie outside the block: a `pl.ds` past the
end) and whether its mask enables it. This module holds those records and sums
them per buffer: elements read twice, never touched, masked-out lanes, lanes that
reach outside the block. Pure NumPy.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

AccessKind = Literal["read", "write", "update"]


@dataclasses.dataclass(frozen=True)
class RefInfo:
    """A buffer the kernel body sees.

    Attributes:
        operand: Its index in `kernel.operands`; -1 for a buffer the body
            allocates itself (`pl.run_scoped`).
        label: Its name ("x_ref", "scoped[0]").
        role: "in", "out", "scratch", "prefetch" or "scoped".
        shape: Its shape inside the kernel (squeezed dimensions dropped).
        dtype: Its dtype's name.
    """

    operand: int
    label: str
    role: str
    shape: tuple[int, ...]
    dtype: str


@dataclasses.dataclass(frozen=True, eq=False)
class ElementAccess:
    """One load or store of the body, lane by lane.

    Attributes:
        kind: "read" (a load), "write" (a store) or "update" (`+=` into the ref,
            an atomic: it reads and writes).
        ref: Index of the buffer in `BlockAccesses.refs`.
        primitive: The JAX primitive ("get", "swap", "masked_load" ...).
        coords: Per buffer dimension, the element each lane touches (same shape as
            the loaded or stored value); may lie outside the buffer.
        mask: Which lanes are enabled (all, without a mask).
        file: Source file of the load or store ("" when unknown).
        line: Its line (0 when unknown).
        step: How many equations ran before it (orders accesses in loops).
    """

    kind: AccessKind
    ref: int
    primitive: str
    coords: tuple[np.ndarray, ...]
    mask: np.ndarray
    file: str = ""
    line: int = 0
    step: int = 0

    @property
    def lanes(self) -> int:
        """Lanes of the access (elements of the value loaded or stored)."""
        return int(self.mask.size)

    @property
    def masked(self) -> int:
        """Lanes the mask turns off."""
        return int(self.mask.size - np.count_nonzero(self.mask))

    def outside(self, shape: tuple[int, ...]) -> np.ndarray:
        """Per lane: whether it lies outside a buffer of `shape`."""
        out = np.zeros(self.mask.shape, dtype=bool)
        for c, n in zip(self.coords, shape, strict=True):
            out |= (c < 0) | (c >= n)
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class AccessMap:
    """What one program's accesses do to one buffer, element by element.

    The arrays cover the buffer plus whatever lanes reached beyond it (up to one
    buffer's size on each side): element `e` of the buffer is at `e - origin`.

    Attributes:
        ref: The buffer.
        origin: Coordinates of the arrays' first entry (0, or negative when lanes
            reached below the buffer).
        reads: Enabled lanes reading each element.
        writes: Enabled lanes writing each element.
        masked: Lanes a mask turned off, per element they would have touched.
        outside_lanes: Enabled lanes outside the buffer (out-of-bounds accesses).
        masked_lanes: Lanes masks turned off, over all accesses.
        accesses: How many loads and stores touched this buffer.
    """

    ref: RefInfo
    origin: tuple[int, ...]
    reads: np.ndarray
    writes: np.ndarray
    masked: np.ndarray
    outside_lanes: int
    masked_lanes: int
    accesses: int

    @property
    def inside(self) -> np.ndarray:
        """Per entry of the arrays: whether it is an element of the buffer."""
        inside = np.ones(self.reads.shape, dtype=bool)
        for d, (lo, n) in enumerate(zip(self.origin, self.ref.shape, strict=True)):
            coords = np.arange(self.reads.shape[d]) + lo
            inside &= ((coords >= 0) & (coords < n)).reshape(
                [-1 if a == d else 1 for a in range(len(self.origin))]
            )
        return inside

    def _in_buffer(self, values: np.ndarray) -> np.ndarray:
        index = tuple(
            slice(-lo, -lo + n) for lo, n in zip(self.origin, self.ref.shape, strict=True)
        )
        return values[index]

    @property
    def untouched(self) -> int:
        """Elements of the buffer no enabled lane reads or writes."""
        return int(np.count_nonzero(self._in_buffer(self.reads + self.writes) == 0))

    @property
    def read_twice(self) -> int:
        """Elements of the buffer read by two or more lanes."""
        return int(np.count_nonzero(self._in_buffer(self.reads) >= 2))

    @property
    def written_twice(self) -> int:
        """Elements of the buffer written by two or more lanes."""
        return int(np.count_nonzero(self._in_buffer(self.writes) >= 2))


@dataclasses.dataclass(frozen=True, eq=False)
class BlockAccesses:
    """Every element-level load and store one program of a kernel makes.

    Attributes:
        kernel: The kernel's name.
        program: The program's grid indices.
        refs: The buffers the body sees, in argument order, then scoped ones.
        accesses: The loads and stores, in the order the body makes them.
        notices: What could not be followed, and where values came from.
        complete: False when interpretation stopped early (see `notices`).
    """

    kernel: str
    program: tuple[int, ...]
    refs: tuple[RefInfo, ...]
    accesses: tuple[ElementAccess, ...]
    notices: tuple[str, ...] = ()
    complete: bool = True

    def ref_index(self, operand: int) -> int:
        """Index in `refs` of the buffer of kernel operand `operand`."""
        for k, ref in enumerate(self.refs):
            if ref.operand == operand:
                return k
        raise KeyError(f"operand {operand} is not among the body's buffers")

    def map(self, ref: int) -> AccessMap:
        """The accesses to buffer `ref` (an index in `refs`), summed per element."""
        info = self.refs[ref]
        shape = info.shape
        mine = [a for a in self.accesses if a.ref == ref]
        lo = [0] * len(shape)
        hi = list(shape)
        for access in mine:
            for d, c in enumerate(access.coords):
                if c.size:
                    # Draw at most one buffer's worth beyond each side.
                    lo[d] = min(lo[d], max(int(c.min()), -shape[d]))
                    hi[d] = max(hi[d], min(int(c.max()) + 1, 2 * shape[d]))
        box = tuple(h - low for h, low in zip(hi, lo, strict=True))
        reads = np.zeros(math.prod(box), dtype=np.int64)
        writes = np.zeros_like(reads)
        masked = np.zeros_like(reads)
        outside_lanes = masked_lanes = 0
        for access in mine:
            positions, drawable = _positions(access.coords, lo, box, access.mask.shape)
            enabled = np.broadcast_to(access.mask, drawable.shape)
            outside = access.outside(shape)
            outside_lanes += int(np.count_nonzero(outside & enabled))
            masked_lanes += access.masked
            on = positions[(drawable & enabled).ravel()]
            off = positions[(drawable & ~enabled).ravel()]
            if access.kind in ("read", "update"):
                reads += np.bincount(on, minlength=reads.size)
            if access.kind in ("write", "update"):
                writes += np.bincount(on, minlength=writes.size)
            masked += np.bincount(off, minlength=masked.size)
        return AccessMap(
            ref=info,
            origin=tuple(lo),
            reads=reads.reshape(box),
            writes=writes.reshape(box),
            masked=masked.reshape(box),
            outside_lanes=outside_lanes,
            masked_lanes=masked_lanes,
            accesses=len(mine),
        )


def _positions(
    coords: tuple[np.ndarray, ...], lo: list[int], box: tuple[int, ...], lanes: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions in the box of every lane, and which lanes fall in the box."""
    drawable = np.ones(lanes, dtype=bool)
    shifted = []
    for c, low, n in zip(coords, lo, box, strict=True):
        s = np.broadcast_to(c, lanes) - low
        drawable &= (s >= 0) & (s < n)
        shifted.append(np.clip(s, 0, max(n - 1, 0)))
    if not coords:  # a scalar buffer: every lane touches its one element
        return np.zeros(drawable.size, dtype=np.int64), drawable
    return np.asarray(np.ravel_multi_index(tuple(shifted), box)).ravel(), drawable
