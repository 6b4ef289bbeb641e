"""Checking one kernel program a test ran, on the values it ran with.

The emulator runs the kernel on the test's operands; its outputs are compared, bit for
bit, with what the test computed (Pallas' interpreter, as the test asked); then the
emulator's checks run (`checking.check_kernel`) and what they found becomes findings
at source lines (`findings.py`). A kernel the emulator does not model (Mosaic GPU, a
mesh, DMAs) is checked in JAX's own interpreter instead (`interpreted.py`), on the
tests' thread (`needs_main_thread`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import checking, compile_cache, emulator
from pallaslab._src.core.checking.outputs import agreement
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import interpreted as interpreted_adapter
from pallaslab._src.core.jax_adapter import observe
from pallaslab._src.core.sanitizer import decisions
from pallaslab._src.core.sanitizer import findings as words
from pallaslab._src.core.sanitizer.interpreted import verify_interpreted
from pallaslab._src.records.sanitize import HARDWARE, SanitizedCall, SanitizerFinding


@dataclasses.dataclass
class Capture:
    """One distinct kernel program, as lowered, and the values of its first run.

    Attributes:
        index: Its place among the programs a session captured, in the order lowered.
        lowered: The kernel as a lowering rule met it.
        config: JAX's options when it was lowered (`observe.config_snapshot`).
        nodeid: The test that ran it first ("" outside any test).
        values: Its operands then its results, copied when it first ran.
        runs: How many times it ran.
        refused: Why it is not checked ("" when it is).
    """

    index: int
    lowered: observe.LoweredKernel
    config: tuple[tuple[str, Any], ...]
    nodeid: str = ""
    values: list[np.ndarray] | None = None
    runs: int = 0
    refused: str = ""


class NeedsMainThreadError(Exception):
    """The check must run on the thread that runs the tests (see `verify`)."""


def needs_main_thread(lowered: observe.LoweredKernel) -> bool:
    """Whether checking this kernel runs one of JAX's interpreters (known beforehand).

    JAX's interpreters keep their state in globals (shared memory, race detection):
    a rerun beside a test that runs the same interpreter would mix the two.
    """
    return interpreted_adapter.interpreter_of(lowered) == interpreted_adapter.MOSAIC_GPU or bool(
        observe.lowered_mesh(lowered)
    )


def verify(
    capture: Capture,
    checks: Collection[str],
    hardware: Collection[str] = HARDWARE,
    *,
    on_main_thread: bool = True,
) -> SanitizedCall:
    """Checks one captured program; never raises (pallaslab's failures are recorded).

    `hardware` is whose race rules apply to a kernel that says neither GPU nor TPU.

    Raises:
        NeedsMainThreadError: Off the main thread (`on_main_thread=False`), for a check that
            turns out to need one of JAX's interpreters, or that a warning stopped
            (the test's warning filters, which may make warnings errors, are global):
            the caller checks it again on the main thread.
    """
    lowered = capture.lowered
    started = time.perf_counter()
    base = SanitizedCall(
        kernel=observe.lowered_name(lowered),
        primitive=lowered.primitive,
        source=observe.lowered_location(lowered),
        nodeid=capture.nodeid,
        status="refused",
        reason=capture.refused,
        runs=capture.runs,
    )
    if capture.refused or capture.values is None:
        return base
    try:
        with observe.restored_config(capture.config):
            checked = _verify(capture, base, checks, hardware, on_main_thread)
    except NeedsMainThreadError:
        raise
    except Exception as error:  # pallaslab's own failure: recorded, the test untouched
        if not on_main_thread and isinstance(error, Warning):
            raise NeedsMainThreadError(str(error)) from error
        checked = dataclasses.replace(
            base, status="crashed", reason=f"{messages.one_line(error)}{_where(error)}"
        )
    return dataclasses.replace(checked, seconds=time.perf_counter() - started)


def _verify(
    capture: Capture,
    base: SanitizedCall,
    checks: Collection[str],
    hardware: Collection[str],
    on_main_thread: bool,
) -> SanitizedCall:
    lowered = capture.lowered
    assert capture.values is not None
    if needs_main_thread(lowered):
        if not on_main_thread:
            raise NeedsMainThreadError("JAX's interpreter")
        # Threads, barriers and copies over a mesh: JAX's interpreter simulates them.
        interpreter = interpreted_adapter.interpreter_of(lowered)
        return verify_interpreted(lowered, capture.values, base, checks, interpreter)
    count = len(lowered.in_avals)
    operands, results = capture.values[:count], capture.values[count:]
    # The emulator models the kernel, whichever interpreter the test chose for it; a
    # grid sized at run time is sized by the values this run had.
    params, in_avals, operands = adapter.with_grid_sizes(
        dict(lowered.params, interpret=True), lowered.in_avals, operands
    )
    call, plan = emulator.analyse(params, in_avals)
    base = dataclasses.replace(base, kernel=call.record.name, grid=tuple(call.grid))
    if plan.failure:
        raise RuntimeError(f"the emulator could not analyse it: {plan.failure}")
    if plan.fallback:
        if call.record.backend in decisions.TPU_INTERPRETED_BACKENDS and not (
            interpreted_adapter.unavailable(interpreted_adapter.TPU)
        ):
            if not on_main_thread:
                raise NeedsMainThreadError("Pallas' TPU interpreter")
            # DMAs, semaphores, remote copies: Pallas' TPU interpreter simulates them.
            checked = verify_interpreted(
                lowered, capture.values, base, checks, interpreted_adapter.TPU
            )
            return dataclasses.replace(
                checked, notes=(*checked.notes, f"the emulator does not run it: {plan.fallback}")
            )
        return dataclasses.replace(base, reason=_sentence(plan.fallback))
    found: list[SanitizerFinding] = []
    agrees: bool | None = None
    worst = 0.0
    kernel_checks = words.kernel_checks(checks)
    findings = checking.check_kernel(
        call,
        plan,
        operands,
        checks=kernel_checks,
        backends=words.backends_of(
            call.record, adapter.interpret_kind(lowered.params.get("interpret")), hardware
        ),
    )
    if findings.failures:
        what, error = findings.failures[0]
        raise RuntimeError(f"{what} failed: {messages.one_line(error)}{_where(error)}")
    unlike = decisions.comparison_refusal(lowered.params)
    if "emulate" in checks and not unlike:
        # The leak or bounds check's run computed the outputs: one compile less.
        emulated = findings.outputs
        if emulated is None:
            emulated = _emulate(call, plan, operands)
        agrees, worst = agreement(emulated, results)
    found.extend(words.findings_of(call, findings, checks, capture.nodeid))
    if agrees is False:
        found.append(words.disagreement(call, worst, capture.nodeid))
    return dataclasses.replace(
        base,
        status="checked",
        reason="",
        agrees=agrees,
        max_abs_diff=worst,
        findings=tuple(found),
        notes=tuple(dict.fromkeys([*findings.notices, *([unlike] if unlike else [])])),
    )


def _emulate(
    call: adapter.KernelCall, plan: emulator.Plan, operands: Sequence[np.ndarray]
) -> list[np.ndarray]:
    def run(*args: Any) -> list[Any]:
        return emulator.run_call(call, plan, args)

    what = ("sanitize", emulator.check_key(call, plan))
    outputs = compile_cache.compile_keyed(what, run, operands)(*operands)
    return [np.asarray(o) for o in outputs]


def _sentence(reason: str) -> str:
    return f"the emulator does not run it: {reason}"


def _where(error: BaseException) -> str:
    """` (at file:line)`: pallaslab's innermost frame of a failure, for the report."""
    tb = error.__traceback__
    place = ""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/pallaslab/" in filename:
            place = f"{filename.rsplit('/pallaslab/', 1)[1]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f" (at pallaslab/{place})" if place else ""
