"""Races, confirmed by running the grid in the seeded orders a backend allows.

`confirm_races` runs concurrent programs reading the same state, TPU cores not
reading output blocks back, and compares with the grid's order. `compare_writes`
compares the values the conflicting programs write: the same values everywhere are
a benign race (wasted work), different ones a race whatever the orders showed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pallaslab._src.core import compile_cache, emulator, sharing
from pallaslab._src.core.checking.outputs import differs, is_number, tiles_of
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import RaceCheck

SEEDS = (0, 1, 2)


def _run_variants(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    requests: Sequence[emulator.Request],
    writes: tuple[int, ...] = (),
) -> tuple[list[list[np.ndarray]], dict[int, np.ndarray]]:
    """Outputs of the kernel under each request, computed in one compiled program.

    With `writes` (blocked outputs), the same program also runs the grid in order
    keeping each program's block of them (`_recorded_writes`), in run order under
    the key -1 of the second result.
    """

    def run(*args: Any) -> tuple[list[list[Any]], dict[int, Any]]:
        outputs = [emulator.run_call(call, plan, args, request) for request in requests]
        return outputs, _recorded_writes(call, plan, args, writes) if writes else {}

    what = (
        "variants",
        emulator.check_key(call, plan),
        tuple(_for_call(r, call) for r in requests),
        writes,
    )
    results, left = compile_cache.compile_keyed(what, run, operands)(*operands)
    return (
        [[np.asarray(o) for o in outputs] for outputs in results],
        {k: np.asarray(v) for k, v in left.items()},
    )


def _for_call(request: emulator.Request, call: adapter.KernelCall) -> emulator.Request:
    """The request as it acts on this kernel.

    Its target (a name with a source line, different each time a cell runs) is
    resolved to "this kernel" or "not this one".
    """
    if request.applies_to(emulator.kernel_key(call.record)):
        return dataclasses.replace(request, target="")
    return emulator.Request(mode=request.mode)


def confirm_races(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    backend: str,
    *,
    kernel_index: int = 0,
    seeds: Sequence[int] = SEEDS,
    report: sharing.RaceReport | None = None,
) -> RaceCheck:
    """Runs the kernel in seeded orders `backend` allows; compares with grid order.

    GPU orders permute all programs, in waves of concurrent programs that read the
    same state (so racing read-modify-writes lose updates); programs sharing an
    array write back only the elements they stored. TPU orders split the leading
    "parallel" axis across two cores and interleave them, and model each core
    keeping output blocks in VMEM without reading them back.

    `report` holds the geometry's conflicts (`sharing.kernel_races`), found here
    when not given. The conflicting programs' writes are compared too
    (`compare_writes`): the same values everywhere are a benign race.
    """
    record = call.record
    if report is None:
        report = sharing.kernel_races(call, plan, operands, backend)
    conflicts = report.conflicts
    if not conflicts or plan.fallback:
        return RaceCheck(record.name, kernel_index, backend, len(conflicts), 0, False)
    key = emulator.kernel_key(record)
    requests = [emulator.Request(target=key)] + [
        emulator.Request(order=backend, seed=int(seed), target=key) for seed in seeds
    ]
    recorded = _writes_to_record(call, report)
    (base, *others), left = _run_variants(call, plan, operands, requests, recorded or ())
    if recorded:
        writes = _judge_writes(call, report, left)
    else:
        note = _TOO_MANY if recorded is None else ""
        writes = WriteComparison(backend, (None,) * len(_writers_conflicts(report)), note)
    tiles: list[tuple[str, tuple[int, ...]]] = []
    worst = 0.0
    # NaN appearing where the grid's order gave a number (or vice versa) counts as inf.
    for outputs in others:
        for m, (want, got) in enumerate(zip(base, outputs, strict=True)):
            mask = differs(want, got)
            if not mask.any():
                continue
            worst = max(worst, _max_change(want, got, mask))
            layout = call.layouts[call.num_inputs + m]
            label = record.operands[call.num_scalars + call.num_inputs + m].label
            for tile in tiles_of(mask, layout):
                if (label, tile) not in tiles:
                    tiles.append((label, tile))
    return RaceCheck(
        kernel=record.name,
        kernel_index=kernel_index,
        backend=backend,
        conflicts=len(conflicts),
        orders=len(seeds),
        confirmed=bool(tiles),
        tiles=tuple(tiles[:64]),
        max_abs_diff=worst,
        seeds=tuple(int(s) for s in seeds),
        writes_agree=_verdict(writes),
    )


def _verdict(writes: WriteComparison | None) -> bool | None:
    if writes is None or not writes.agree:
        return None
    if any(a is False for a in writes.agree):
        return False
    return True if writes.all_agree else None


def _max_change(want: np.ndarray, got: np.ndarray, mask: np.ndarray) -> float:
    if not is_number(want.dtype):
        return float(mask.sum())
    a = want[mask].astype(np.float64)
    b = got[mask].astype(np.float64)
    diff = np.abs(a - b)
    return math.inf if np.isnan(diff).any() else float(diff.max())


# Programs x block elements whose writes are kept to compare them, at most.
MAX_WRITTEN_ELEMENTS = 1 << 25


@dataclasses.dataclass(frozen=True)
class WriteComparison:
    """Whether programs that write the same elements write the same values there.

    Attributes:
        backend: Whose conflicts were compared.
        agree: Per conflict between writers (in the order given; reads of an aliased
            input are no such conflict and are left out), whether every program that
            writes its elements leaves the same values there (NaN equals NaN); None
            where that cannot be said (a program reads what another stores, atomics
            mixed with plain accesses).
        note: Why nothing was compared ("" when the conflicts were).
    """

    backend: str
    agree: tuple[bool | None, ...]
    note: str = ""

    @property
    def all_agree(self) -> bool:
        """Whether every conflict's writes agree (benign, wasted work)."""
        return bool(self.agree) and all(a is True for a in self.agree)


_TOO_MANY = "the programs' writes were not compared (the grid's blocks are too many to keep)"


def compare_writes(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    report: sharing.RaceReport,
) -> WriteComparison:
    """Runs the grid in order, keeping each program's block of the conflicting outputs.

    Programs that write the same block (or, in memory programs share, the same
    elements) with the same values race only in name: whichever runs last, the result
    is the same, and the work of all but one is wasted. Programs that write different
    values race: the result depends on the order. (`confirm_races` compares them in
    the program that runs its orders.)
    """
    blocks = _writes_to_record(call, report)
    if not blocks:
        note = _TOO_MANY if blocks is None else ""
        return WriteComparison(report.backend, (None,) * len(_writers_conflicts(report)), note)

    def run(*args: Any) -> dict[int, Any]:
        return _recorded_writes(call, plan, args, blocks)

    what = ("writes", emulator.check_key(call, plan), blocks)
    left = compile_cache.compile_keyed(what, run, operands)(*operands)
    return _judge_writes(call, report, {k: np.asarray(v) for k, v in left.items()})


def _writes_to_record(
    call: adapter.KernelCall, report: sharing.RaceReport
) -> tuple[int, ...] | None:
    """The blocked outputs whose writes to keep; None when they are too many to keep."""
    blocks = tuple(sorted({c.position - call.num_scalars for c in _writers_conflicts(report)}))
    size = sum(math.prod(call.layouts[k].kernel_block_shape) for k in blocks)
    if call.record.num_programs * size > MAX_WRITTEN_ELEMENTS:
        return None
    return blocks


def _writers_conflicts(report: sharing.RaceReport) -> list[geometry.Conflict]:
    """The conflicts between programs that write (not reads of an aliased input)."""
    return [c for c in report.conflicts if c.kind != "aliased-read"]


def _recorded_writes(
    call: adapter.KernelCall, plan: emulator.Plan, args: Sequence[Any], blocks: tuple[int, ...]
) -> dict[int, Any]:
    """Traced: each program's block of `blocks` as it leaves it, in grid order.

    Outputs start from an ordinary value here (not NaN), so an accumulator read
    before it is written shows its partial sums, which differ.
    """
    fills = {
        call.num_scalars + k: emulator.fill_value(call.layouts[k].dtype, "alt") for k in blocks
    }
    _, probed = emulator.run_probed(call, plan, args, emulator.EMULATE, fills, record_writes=blocks)
    assert probed is not None
    return {**probed.writes, -1: jnp.asarray(probed.programs)}


def _judge_writes(
    call: adapter.KernelCall, report: sharing.RaceReport, left: dict[int, np.ndarray]
) -> WriteComparison:
    ran = left[-1]
    rows = {tuple(int(c) for c in program): row for row, program in enumerate(ran)}
    row_of = np.full(max(call.record.num_programs, 1), -1, np.int64)
    row_of[_linear(ran, call.grid)] = np.arange(len(ran))
    agree: list[bool | None] = []
    for conflict in _writers_conflicts(report):
        written = left[conflict.position - call.num_scalars]
        if conflict.kind == "element-store":
            layout = call.layouts[conflict.position - call.num_scalars]
            shared = report.shared.get(conflict.position)
            agree.append(_elements_agree(written, shared, row_of, layout.squeezed))
        elif conflict.element_level:
            agree.append(None)  # reads of another's stores, atomics: order matters
        else:
            values = [written[rows[p]] for p in conflict.programs if p in rows]
            agree.append(all(not differs(values[0], v).any() for v in values[1:]))
    return WriteComparison(report.backend, tuple(agree))


def _elements_agree(
    written: np.ndarray,
    shared: geometry.SharedAccesses | None,
    row_of: np.ndarray,
    squeezed: Sequence[bool],
) -> bool | None:
    """Whether the first and the last program to store each element stored the same value.

    `written` holds each program's block (squeezed dimensions, which only pick the
    program's slice of a whole-array ref, left out); `shared` indexes the array.
    """
    if shared is None:
        return None
    both = (shared.first_store >= 0) & (shared.first_store != shared.last_store)
    index = np.nonzero(both)
    first = row_of[shared.first_store[index]]
    last = row_of[shared.last_store[index]]
    if (first < 0).any() or (last < 0).any():
        return None
    kept = tuple(i for i, gone in zip(index, squeezed, strict=True) if not gone)
    return not differs(written[(first, *kept)], written[(last, *kept)]).any()


def _linear(programs: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    """Linear indices in grid order of programs (one row of grid indices each)."""
    if not grid:
        return np.zeros(len(programs), np.int64)
    return np.asarray(np.ravel_multi_index(tuple(programs.T), grid), np.int64)
