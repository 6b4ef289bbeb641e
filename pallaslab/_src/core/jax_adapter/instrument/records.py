"""What the instrumented body is asked to record, and what it gives back (records).

`AccessSite` (a load or store of the body), `Probe` (what to record), `Probed` (what
one program recorded), `InstrumentedBody` (the body and its sites).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

BIG = np.iinfo(np.int32).max


@dataclasses.dataclass(frozen=True)
class AccessSite:
    """One load or store of a kernel body (plain values).

    Attributes:
        index: Its number among the body's sites.
        kind: "load", "store", "update" (`+=`) or "atomic".
        primitive: The JAX primitive ("get", "masked_load", ...).
        ref: The kernel operand it accesses (its position among the body's refs),
            -1 for a buffer of `pl.run_scoped`, -2 when unknown.
        masked: Whether it has a mask (`pltriton.load(..., mask=)`).
        other: For masked loads, whether `other=` gives the masked-out lanes a value.
        dynamic: Whether an index is computed while the kernel runs.
        file: Its source file ("" when unknown).
        line: Its line (0 when unknown).
    """

    index: int
    kind: str
    primitive: str
    ref: int
    masked: bool
    other: bool
    dynamic: bool
    file: str = ""
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Probe:
    """What an instrumented run records (hashable: part of what is traced).

    Attributes:
        flags: Per site, whether an enabled lane lay outside its ref, and the
            elements it reached.
        fills: Masked loads without `other=` (site indices) whose masked-out lanes
            may take other values: per site, `fills` passes (switch, value), and the
            lanes take `value` where `switch` is true (as loaded otherwise).
        stats: Blocks (indices among the kernel's blocked operands) whose elements'
            first and last storing and touching programs are accumulated.
        stored: Blocks whose elements each program stored are returned.
    """

    flags: bool = False
    fills: tuple[int, ...] = ()
    stats: tuple[int, ...] = ()
    stored: tuple[int, ...] = ()


# Per tracked block, the accumulated records: first and last program (linear index)
# that stored, touched (loaded or stored) and atomically updated each element.
STATS = ("first_store", "last_store", "first_touch", "last_touch", "first_atomic", "last_atomic")


def empty_stats(shape: Sequence[int]) -> dict[str, Any]:
    """Records of no program: firsts at the largest int32, lasts at -1."""
    return {
        name: jnp.full(tuple(shape), BIG if name.startswith("first") else -1, jnp.int32)
        for name in STATS
    }


class Probed(NamedTuple):
    """What one program's instrumented run recorded (JAX values).

    Attributes:
        flags: (sites,) whether the site reached outside its ref with an enabled lane.
        low: (sites, rank) the smallest element coordinate such an access reached.
        high: (sites, rank) the largest.
        stats: Per tracked block, the records of `STATS`, updated with this program.
        stored: Per block asked for, which elements this program stored (bool), and
            which it updated atomically.
    """

    flags: Any
    low: Any
    high: Any
    stats: dict[int, dict[str, Any]]
    stored: dict[int, tuple[Any, Any]]


@dataclasses.dataclass(frozen=True)
class InstrumentedBody:
    """A kernel body that runs one program and records what `Probe` asks.

    Attributes:
        sites: Every load and store of the body, in order.
        rank: The largest rank of a ref (coordinates recorded per site).
        ref_shapes: The shape of each ref the body takes (its block), in order.
        run: `run(pids, scalars, blocks, scratch, program, probe, fills, stats)`
            returns `(blocks, scratch, Probed)`: pids one int32 per grid axis,
            `program` the program's linear index (int32), `fills` one (switch, value) per
            `probe.fills` site, `stats` per `probe.stats` block its records so far.
    """

    sites: tuple[AccessSite, ...]
    rank: int
    ref_shapes: tuple[tuple[int, ...], ...]
    run: Callable[..., tuple[list[Any], list[Any], Probed]] = dataclasses.field(
        repr=False, compare=False
    )


class UnsupportedError(Exception):
    """The body does something the instrumented evaluator does not follow."""
