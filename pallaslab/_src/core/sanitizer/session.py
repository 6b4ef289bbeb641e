"""A sanitizer session: every kernel a test suite runs, captured once and checked.

`Sanitizer.install` registers an observer with pallaslab's lowering rules: every
kernel lowered for the CPU (eagerly, under `jit`, `vmap`, `grad`: JAX lowers what its
transformations made) is keyed by what it is (the compile cache's key: its parameters
and operand types) and decided (`decisions.refusal`). A kernel to check gets a host
callback that copies its operands and results the first time it runs; nothing else
about the program changes, and kernels without an interpreter keep JAX's own error on
a CPU (the plugin changes no test's outcome).

After each test, `finish` checks the programs the test ran for the first time, in
JAX's configuration as it was when they were lowered, and returns them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Collection
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.jax_adapter import observe
from pallaslab._src.core.sanitizer import decisions
from pallaslab._src.core.sanitizer.verify import Capture, verify
from pallaslab._src.records.sanitize import CHECKS, HARDWARE, SanitizedCall, SanitizerReport


@dataclasses.dataclass(frozen=True)
class SanitizerOptions:
    """What a session checks.

    Attributes:
        checks: A subset of `records.sanitize.CHECKS`.
        max_bytes: Operands and results copied per program, at most; larger programs
            are not checked (their refusal says so).
        hardware: Whose race rules apply to kernels that say neither GPU nor TPU (a
            subset of `records.sanitize.HARDWARE`).
    """

    checks: frozenset[str] = frozenset(CHECKS)
    max_bytes: int = decisions.DEFAULT_MAX_BYTES
    hardware: frozenset[str] = frozenset(HARDWARE)


class Sanitizer:
    """Captures every kernel program a test suite runs, and checks each once."""

    def __init__(self, options: SanitizerOptions | None = None) -> None:
        self.options = options or SanitizerOptions()
        self._captures: dict[Any, Capture] = {}
        self._order: list[Capture] = []
        self._done: list[SanitizedCall] = []
        self._checked: set[int] = set()
        self._nodeid = ""
        self._lock = threading.Lock()
        self._installed = False
        self._previous_auto = True

    # -- installing -------------------------------------------------------------

    def install(self) -> str | None:
        """Starts observing; returns a notice when this JAX cannot be observed."""
        notice = jax_adapter.install_cpu_interpret()
        if notice:
            return notice
        # Outside pallaslab's own blocks, CPU kernels keep JAX's behaviour exactly.
        self._previous_auto = jax_adapter.set_auto_interpret_default(False)
        observe.set_observer(self._observe)
        self._installed = True
        return None

    def uninstall(self) -> None:
        """Stops observing (kernels lowered afterwards are not seen)."""
        if self._installed:
            observe.set_observer(None)
            jax_adapter.set_auto_interpret_default(self._previous_auto)
            self._installed = False

    # -- tests ------------------------------------------------------------------

    def begin(self, nodeid: str) -> None:
        """Kernels run from now on are attributed to this test."""
        self._nodeid = nodeid

    def finish(self) -> list[SanitizedCall]:
        """Checks the programs run for the first time since the last `finish`."""
        # Callbacks of programs still running fire first; a failure of the test's own
        # effects is the test's outcome to report, not the checks'.
        with contextlib.suppress(Exception):
            jax.effects_barrier()
        with self._lock:
            pending = [
                c for c in self._order if id(c) not in self._checked and (c.runs or c.refused)
            ]
            self._checked.update(id(c) for c in pending)
        done = []
        observe.set_observer(None)  # the checks' own kernels are not the suite's
        try:
            for capture in pending:
                call = verify(capture, self.options.checks, self.options.hardware)
                capture.values = None  # checked: the copies go
                done.append(call)
        finally:
            if self._installed:
                observe.set_observer(self._observe)
        self._done.extend(done)
        self._nodeid = ""
        return done

    def report(self, *, strict: bool = False, failed: tuple[str, ...] = ()) -> SanitizerReport:
        """Everything checked so far (call `finish` first for the last test's)."""
        return SanitizerReport(
            checks=tuple(c for c in CHECKS if c in self.options.checks),
            calls=tuple(self._done),
            strict=strict,
            tests_failed_by_findings=failed,
        )

    # -- the observer -------------------------------------------------------------

    def _observe(self, lowered: observe.LoweredKernel) -> Any:
        if lowered.for_export or lowered.platform != "cpu":
            return None
        key = _key(lowered)
        with self._lock:
            capture = self._captures.get(key)
            if capture is None:
                capture = Capture(
                    lowered=lowered,
                    config=observe.config_snapshot(),
                    refused=decisions.refusal(lowered, self.options.max_bytes),
                )
                self._captures[key] = capture
                self._order.append(capture)
        if capture.refused and lowered.unreadable:
            # Its values cannot reach a callback: counted as run where it is lowered.
            capture.runs = max(capture.runs, 1)
            capture.nodeid = capture.nodeid or self._nodeid
            return None
        return self._callback(capture)

    def _callback(self, capture: Capture) -> Any:
        def ran(*values: Any) -> None:
            with self._lock:
                capture.runs += 1
                if capture.runs > 1:
                    return
                capture.nodeid = self._nodeid
                if not capture.refused:
                    capture.values = [np.array(v, copy=True) for v in values]

        return ran


def _key(lowered: observe.LoweredKernel) -> Any:
    """What makes two lowered kernels the same program (the compile cache's key)."""
    try:
        params = jax_adapter.value_key(lowered.params)
    except Exception:  # a parameter the key cannot describe: this object itself
        params = id(lowered.params)
    return (lowered.primitive, params, lowered.in_avals, lowered.platform)


def checked_names(checks: Collection[str]) -> frozenset[str]:
    """The checks asked for, validated against `CHECKS`.

    Raises:
        ValueError: Naming the unknown check and the known ones.
    """
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check {', '.join(unknown)}: choose from {', '.join(CHECKS)}")
    return frozenset(checks)
