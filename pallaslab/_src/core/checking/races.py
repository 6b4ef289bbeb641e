"""Races, confirmed by running the grid in the seeded orders a backend allows.

`confirm_races` runs concurrent programs reading the same state, TPU cores not
reading output blocks back, and compares with the grid's order.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core import compile_cache, emulator, sharing
from pallaslab._src.core.checking.outputs import differs, tiles_of
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import RaceCheck

SEEDS = (0, 1, 2)


def _run_variants(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    requests: Sequence[emulator.Request],
) -> list[list[np.ndarray]]:
    """Outputs of the kernel under each request, computed in one compiled program."""

    def build() -> Any:
        def run(*args: Any) -> list[list[Any]]:
            return [emulator.run_call(call, plan, args, request) for request in requests]

        return run

    what = ("variants", emulator.check_key(call, plan), tuple(_for_call(r, call) for r in requests))
    results = compile_cache.compile_keyed(what, build(), operands)(*operands)
    return [[np.asarray(o) for o in outputs] for outputs in results]


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
    conflicts: Sequence[geometry.Conflict] | None = None,
) -> RaceCheck:
    """Runs the kernel in seeded orders `backend` allows; compares with grid order.

    GPU orders permute all programs, in waves of concurrent programs that read the
    same state (so racing read-modify-writes lose updates); programs sharing an
    array write back only the elements they stored. TPU orders split the leading
    "parallel" axis across two cores and interleave them, and model each core
    keeping output blocks in VMEM without reading them back.

    `conflicts` are the geometry's (`sharing.kernel_races`), found here when not given.
    """
    record = call.record
    if conflicts is None:
        conflicts = sharing.kernel_races(call, plan, operands, backend).conflicts
    if not conflicts or plan.fallback:
        return RaceCheck(record.name, kernel_index, backend, len(conflicts), 0, False)
    key = emulator.kernel_key(record)
    requests = [emulator.Request(target=key)] + [
        emulator.Request(order=backend, seed=int(seed), target=key) for seed in seeds
    ]
    base, *others = _run_variants(call, plan, operands, requests)
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
    )


def _max_change(want: np.ndarray, got: np.ndarray, mask: np.ndarray) -> float:
    if want.dtype.kind not in "fciu":
        return float(mask.sum())
    a = want[mask].astype(np.float64)
    b = got[mask].astype(np.float64)
    diff = np.abs(a - b)
    return math.inf if np.isnan(diff).any() else float(diff.max())
