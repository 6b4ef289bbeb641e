"""Loads and stores outside their ref, found by the instrumented body in every program.

`find_out_of_bounds` reports a dynamic slice JAX clamps into the block (so the
emulator, like Pallas' interpreter, quietly used other elements), or masked lanes
enabled outside the array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core import compile_cache, emulator
from pallaslab._src.core.checking.outputs import ref_label
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.records import OutOfBounds, SourceLocation

# Programs named per report (the count says how many in all).
_PROGRAMS_SHOWN = 8


def find_out_of_bounds(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
) -> list[OutOfBounds]:
    """Loads and stores that reach outside their ref (`bounds_and_outputs`' first part)."""
    return bounds_and_outputs(call, plan, operands, kernel_index=kernel_index)[0]


def bounds_and_outputs(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
) -> tuple[list[OutOfBounds], list[np.ndarray] | None]:
    """Loads and stores that reach outside their ref, in any program, per source line.

    Runs the instrumented body for every program in one compiled computation (the
    plan's batches): each access whose index is computed at run time, or that has a
    mask, says whether an enabled lane fell outside its ref, and where it reached.

    Returns:
        One `OutOfBounds` per access site that does it in some program; and the
        kernel's outputs, computed on the way (None when nothing needed watching,
        so nothing ran): one compile serves the check and the emulated result.

    Raises:
        instrument.UnsupportedError: When the body cannot be instrumented.
    """
    if plan.fallback:
        return [], None
    body = call.instrumented
    if body is None:
        raise instrument.UnsupportedError(call.instrumentation_notice)
    watched = [site for site in body.sites if site.dynamic or site.masked]
    if not watched:
        return [], None
    probe = instrument.Probe(flags=True)

    def run(*args: Any) -> Any:
        outputs, probed = emulator.run_probed(call, plan, args, probe=probe)
        assert probed is not None
        return outputs, (probed.programs, probed.flags, probed.low, probed.high)

    what = ("bounds", emulator.check_key(call, plan))
    outputs, checked = compile_cache.compile_keyed(what, run, operands)(*operands)
    programs, flags, low, high = (np.asarray(v) for v in checked)
    order = np.lexsort(programs.T[::-1]) if programs.shape[1] else np.arange(len(programs))
    found = []
    for site in watched:
        hits = order[flags[order, site.index]]
        if not hits.size:
            continue
        first = hits[0]
        rank = len(_ref_shape(call, body, site))
        found.append(
            OutOfBounds(
                kernel=call.record.name,
                kernel_index=kernel_index,
                ref=ref_label(call, site.ref),
                access=site.kind,
                cause="masked-lanes-outside" if site.masked else "clamped-slice",
                shape=_ref_shape(call, body, site),
                span=tuple(
                    (int(low[first, site.index, d]), int(high[first, site.index, d]))
                    for d in range(rank)
                ),
                programs=tuple(tuple(int(c) for c in programs[p]) for p in hits[:_PROGRAMS_SHOWN]),
                program_count=int(hits.size),
                location=SourceLocation(site.file, site.line) if site.file else None,
            )
        )
    return found, [np.asarray(o) for o in outputs]


def _ref_shape(
    call: adapter.KernelCall, body: instrument.InstrumentedBody, site: instrument.AccessSite
) -> tuple[int, ...]:
    return body.ref_shapes[site.ref] if 0 <= site.ref < len(body.ref_shapes) else ()
