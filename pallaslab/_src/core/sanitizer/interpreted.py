"""Checking a kernel in JAX's own interpreter, where pallaslab's emulator does not model it.

Mosaic GPU kernels (`plgpu.kernel`, GPU meshes), TPU kernels over a mesh and TPU
kernels with DMAs or semaphores run in JAX's interpreters, whose simulation of threads,
barriers, TMA and DMA copies pallaslab's emulator does not repeat. They are checked by
running them again there, on the operands the test gave them:

- once with the interpreter's race detector on and out-of-bounds reads raised (races
  and reads past a buffer become findings at their source lines; the run is then made
  again with such reads giving uninitialised values);
- once more with fresh memory filled otherwise (zeros instead of NaN, or the reverse):
  output elements that change depend on memory nothing wrote (`uninit`);
- the first run's outputs compared, bit for bit, with what the test computed
  (`emulate`: here the interpreter with its checks on, against the test's run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

import jax
import numpy as np

from pallaslab._src.core import gpu_interpreting, jax_adapter
from pallaslab._src.core.checking.outputs import agreement, differs
from pallaslab._src.core.jax_adapter import interpreted as adapter
from pallaslab._src.core.jax_adapter import observe
from pallaslab._src.core.sanitizer.findings import difference_words
from pallaslab._src.records import InterpreterRace
from pallaslab._src.records.sanitize import SanitizedCall, SanitizerFinding

_NAMES = {
    adapter.MOSAIC_GPU: "JAX's Mosaic GPU interpreter",
    adapter.TPU: "Pallas' TPU interpreter",
}
_OTHER_FILL = {"nan": "zero", "zero": "nan"}


@dataclasses.dataclass
class _Run:
    """One run in the interpreter: its outputs, what stopped it, the races it reported."""

    outputs: list[np.ndarray]
    stopped: jax_adapter.OutOfBoundsAccess | None
    races: list[tuple[jax_adapter.GpuRaceAccess, jax_adapter.GpuRaceAccess]]


def verify_interpreted(
    lowered: observe.LoweredKernel,
    values: Sequence[np.ndarray],
    base: SanitizedCall,
    checks: Collection[str],
    interpreter: str,
) -> SanitizedCall:
    """Checks one captured program in JAX's interpreter; raises on pallaslab's failure."""
    name = base.kernel
    operands, results = values[: len(lowered.in_avals)], values[len(lowered.in_avals) :]
    who = _NAMES[interpreter]
    notes = [f"checked in {who} (pallaslab's emulator does not model this kernel)"]
    races_on = "races" in checks and adapter.detects_races(interpreter)
    if "races" in checks and not races_on:
        notes.append(f"races not checked: this JAX's {who} has no race detector")
    fill = str(getattr(lowered.params.get("interpret"), "uninitialized_memory", "nan"))
    fill = fill if fill in _OTHER_FILL else "nan"
    first = _run(lowered, interpreter, operands, detect_races=races_on, fill=fill)
    found: list[SanitizerFinding] = []
    if races_on:
        found.extend(_race_findings(first.races, name, base, interpreter))
    if first.stopped is not None and "bounds" in checks:
        found.append(_out_of_bounds(first.stopped, name, base, interpreter))
    if "uninit" in checks:
        second = _run(
            lowered,
            interpreter,
            operands,
            detect_races=False,
            fill=_OTHER_FILL[fill],
            out_of_bounds_reads="uninitialized" if first.stopped else "raise",
        )
        raced = any(f.kind == "race" for f in found)
        found.extend(_uninitialized(first.outputs, second.outputs, name, base, who, raced))
    agrees: bool | None = None
    worst = 0.0
    if "emulate" in checks:
        asked = adapter.asked_otherwise(lowered)
        if asked:
            notes.append(
                f"not compared with the test's result: the test asked its interpreter to "
                f"{' and '.join(asked)}"
            )
        else:
            agrees, worst = agreement(first.outputs, results)
            if not agrees:
                found.append(_disagreement(name, base, worst, who))
    return dataclasses.replace(
        base,
        status="checked",
        reason="",
        agrees=agrees,
        max_abs_diff=worst,
        findings=tuple(found),
        notes=tuple(notes),
    )


def _run(
    lowered: observe.LoweredKernel,
    interpreter: str,
    operands: Sequence[np.ndarray],
    *,
    detect_races: bool,
    fill: str,
    out_of_bounds_reads: str = "raise",
) -> _Run:
    """Runs the kernel once; an out-of-bounds read it stops is noted and run past."""

    def once(reads: str) -> list[np.ndarray]:
        params = adapter.interpret_params(
            lowered,
            interpreter,
            detect_races=detect_races,
            out_of_bounds_reads=reads,
            uninitialized_memory=fill,
        )
        outputs = adapter.rerun(lowered, operands, params)
        jax.effects_barrier()  # the race reports are out
        return outputs

    stopped = None
    with jax_adapter.race_capture("core" if interpreter == adapter.TPU else "thread") as races:
        try:
            outputs = once(out_of_bounds_reads)
        except Exception as error:
            stopped = jax_adapter.interpreter_out_of_bounds(error)
            adapter.reset(interpreter)
            if stopped is None or stopped.access != "load":
                raise
            jax_adapter.forget_failures()
            outputs = once("uninitialized")
    return _Run(outputs, stopped, list(races))


def _race_findings(
    reported: Sequence[tuple[jax_adapter.GpuRaceAccess, jax_adapter.GpuRaceAccess]],
    name: str,
    base: SanitizedCall,
    interpreter: str,
) -> list[SanitizerFinding]:
    found = []
    for reported_race in gpu_interpreting.races(reported, ()):
        race = dataclasses.replace(_write_first(reported_race), kernel=name)
        found.append(
            SanitizerFinding(
                kind="race",
                check="races",
                kernel=name,
                message=(
                    f"{race.describe(with_location=False)} Found by "
                    f"{_NAMES[interpreter]}'s race detector."
                ),
                location=race.location or base.source,
                nodeid=base.nodeid,
                backend="gpu" if interpreter == adapter.MOSAIC_GPU else "tpu",
            )
        )
    return found


def _write_first(race: InterpreterRace) -> InterpreterRace:
    """The race with its write first (of two writes, the earlier line).

    The detector reports whichever access came second first, and threads run in no
    fixed order: a finding is placed at the write, the same line every run.
    """

    def rank(k: int) -> tuple[bool, int]:
        at = race.location if k == 0 else race.other_location
        return (race.accesses[k] != "write", at.line if at is not None else 0)

    if rank(0) <= rank(1):
        return race
    return dataclasses.replace(
        race,
        accesses=(race.accesses[1], race.accesses[0]),
        threads=(race.threads[1], race.threads[0]),
        location=race.other_location,
        other_location=race.location,
    )


def _out_of_bounds(
    stopped: jax_adapter.OutOfBoundsAccess, name: str, base: SanitizedCall, interpreter: str
) -> SanitizerFinding:
    finding = dataclasses.replace(
        gpu_interpreting.out_of_bounds(stopped, ()),
        kernel=name,
        cause="tpu-interpreter" if interpreter == adapter.TPU else "interpreter",
    )
    return SanitizerFinding(
        kind="out-of-bounds",
        check="bounds",
        kernel=name,
        message=finding.describe(with_location=False),
        location=stopped.location or base.source,
        nodeid=base.nodeid,
    )


def _uninitialized(  # noqa: PLR0917 - two runs, then what names the finding
    first: Sequence[np.ndarray],
    second: Sequence[np.ndarray],
    name: str,
    base: SanitizedCall,
    who: str,
    raced: bool,
) -> list[SanitizerFinding]:
    """Output elements that changed with what fills fresh memory: read before written."""
    found = []
    for position, (a, b) in enumerate(zip(first, second, strict=True)):
        mask = differs(np.asarray(a), np.asarray(b))
        if not mask.any():
            continue
        where = _first_index(mask)
        found.append(
            SanitizerFinding(
                kind="uninitialized",
                check="uninit",
                kernel=name,
                message=(
                    f"{name}: {int(mask.sum())} of {mask.size} elements of output {position} "
                    f"(the first at {where}) depend on memory nothing wrote: they change when "
                    f"{who} fills fresh memory with zeros instead of NaN (the output is left "
                    "partly unwritten, or computed from buffers read before they were written)"
                    + ("; some may differ through the race above." if raced else ".")
                ),
                location=base.source,
                nodeid=base.nodeid,
            )
        )
    return found


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def _disagreement(name: str, base: SanitizedCall, worst: float, who: str) -> SanitizerFinding:
    size = difference_words(worst)
    return SanitizerFinding(
        kind="disagreement",
        check="emulate",
        kernel=name,
        message=(
            f"{name}: run again in {who}, on the same operands, it computed different outputs "
            f"than in the test ({size}): its result depends on timing or on memory nothing wrote."
        ),
        location=base.source,
        nodeid=base.nodeid,
    )
