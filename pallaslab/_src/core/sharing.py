"""Races on outputs that programs share, decided element by element.

Kernels written in the Triton style take whole arrays (no BlockSpecs, or `pl.ANY`
refs) and let each program pick its part with `pl.program_id`, `pl.ds` and masks.
Every program then has the same block, and block windows alone would call every
such kernel racy. On a GPU that block is the array in global memory: a program
writes only the elements it stores. For those outputs this module runs the kernel's
instrumented body over the grid, in grid order, recording for every element the first
and last program that stored and touched it, and hands the records to the geometry
(`geometry.races.find_races(..., shared=...)`) as plain arrays.

Cost: the run is one emulated run of the kernel (each program's block of a whole-array
output is the whole array), so programs x shared elements bounds it. Past
`MAX_ELEMENT_WORK`, runs of consecutive programs spread over the grid are checked
instead of all of them, and the result says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core import compile_cache, emulator
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Kernel

# Programs x elements of shared outputs checked in full; beyond it, a sample.
MAX_ELEMENT_WORK = 1 << 28
# Fewest programs a sample holds, and how many runs of consecutive ones it has.
MIN_SAMPLE = 64
SAMPLE_RUNS = 8


@dataclasses.dataclass(frozen=True)
class RaceReport:
    """A kernel's races under one backend's rules, element-level where it matters.

    Attributes:
        backend: "gpu" or "tpu".
        conflicts: The conflicts (element-level for shared outputs under GPU rules).
        shared: The element records the geometry was given, per output position.
        notice: What could not be checked element by element, and why ("" if all was).
    """

    backend: str
    conflicts: tuple[geometry.Conflict, ...]
    shared: dict[int, geometry.SharedAccesses] = dataclasses.field(default_factory=dict)
    notice: str = ""

    def sentences(self, kernel: Kernel) -> list[str]:
        """The inspector's words: what races and why, then the notice."""
        words = geometry.summarize(kernel, self.conflicts, self.backend, self.shared)
        return [*words, self.notice] if self.notice else words


def kernel_races(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    backend: str,
) -> RaceReport:
    """The kernel's conflicts under `backend`, shared outputs decided element by element.

    Args:
        call: The kernel, as the emulator reads it.
        plan: Its plan.
        operands: The values it receives (scalar prefetch, then inputs).
        backend: "gpu" or "tpu".
    """
    record = call.record
    prefetch = [np.asarray(v) for v in operands[: call.num_scalars]]
    positions = geometry.needs_elements(record, backend, prefetch)
    notice = ""
    shared: dict[int, geometry.SharedAccesses] = {}
    if positions:
        try:
            shared = shared_accesses(call, plan, operands, positions)
        except instrument.UnsupportedError as error:  # block-level conflicts stand, with why
            labels = ", ".join(record.operands[p].label for p in positions)
            notice = (
                f"{backend.upper()}: programs share {labels}; whether they store the same "
                f"elements could not be checked ({_reason(error)}), so every program that "
                "shares a block counts as writing all of it."
            )
    conflicts = geometry.find_races(record, backend, prefetch, shared)
    if shared and not notice:
        sampled = next((a for a in shared.values() if a.sampled), None)
        if sampled is not None:
            notice = (
                f"{backend.upper()}: {sampled.programs.size} of {record.num_programs} programs "
                f"were checked element by element ({SAMPLE_RUNS} runs of consecutive "
                "programs spread over the grid; the whole grid would take too long): races "
                "between the others are not ruled out."
            )
    return RaceReport(backend, tuple(conflicts), shared, notice)


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


# A few recent results: the Kernels tab and a run's checks ask for the same kernel.
_cache: dict[tuple[int, str, tuple[int, ...]], tuple[Any, dict[int, Any]]] = {}
_CACHE_SIZE = 16


def shared_accesses(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    positions: Sequence[int],
) -> dict[int, geometry.SharedAccesses]:
    """Per output position, which programs store and touch each of its elements.

    Runs the instrumented body over the grid in grid order (or a sample of it, see
    `MAX_ELEMENT_WORK`) in one compiled computation.

    Raises:
        instrument.UnsupportedError: When the body cannot be instrumented.
    """
    if plan.fallback:
        raise instrument.UnsupportedError(f"the emulator does not run it: {plan.fallback}")
    key = (id(call), _digest(operands), tuple(positions))
    cached = _cache.get(key)
    if cached is not None and cached[0]() is call:
        return cached[1]
    blocks = tuple(p - call.num_scalars for p in positions)
    elements = sum(math.prod(call.layouts[k].padded_shape) for k in blocks)
    total = call.record.num_programs
    budget = max(MIN_SAMPLE, MAX_ELEMENT_WORK // max(elements, 1))
    chosen = None if total <= budget else sample_programs(total, budget)
    coords = geometry.program_coordinates(call.grid)
    probe = instrument.Probe(stats=blocks)

    def run(*args: Any) -> Any:
        _, probed = emulator.run_probed(
            call,
            plan,
            args,
            probe=probe,
            programs=None if chosen is None else coords[chosen],
        )
        assert probed is not None
        return probed.stats

    sample = None if chosen is None else tuple(chosen.tolist())
    what = ("elements", emulator.check_key(call, plan), blocks, sample)
    stats = compile_cache.compile_keyed(what, run, operands)(*operands)
    ran = np.arange(total) if chosen is None else chosen
    found = {}
    for position, k in zip(positions, blocks, strict=True):
        records = {name: np.asarray(value) for name, value in stats[k].items()}
        for name in instrument.STATS:
            if name.startswith("first"):
                records[name] = np.where(records[name] == np.iinfo(np.int32).max, -1, records[name])
        found[position] = geometry.SharedAccesses(
            position=position,
            programs=ran,
            sampled=chosen is not None,
            **{name: records[name].astype(np.int64) for name in instrument.STATS},
        )
    while len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[key] = (weakref.ref(call), found)
    return found


def sample_programs(total: int, count: int) -> np.ndarray:
    """`count` of `total` programs (linear indices): runs of consecutive ones, spread out.

    Neighbouring programs are the likeliest to overlap (an offset off by one block), so
    the sample keeps runs of them; the runs start at evenly spaced points, the first
    at program 0 and the last ending at the last program.
    """
    count = min(count, total)
    runs = max(1, min(SAMPLE_RUNS, count // 2))
    length = count // runs
    starts = np.linspace(0, total - length, runs).astype(np.int64)
    chosen = np.unique((starts[:, None] + np.arange(length)[None, :]).reshape(-1))
    return chosen[chosen < total]


def _digest(operands: Sequence[Any]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for value in operands:
        array = np.asarray(value)
        digest.update(f"{array.shape}{array.dtype}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
