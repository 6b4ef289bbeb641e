"""A sanitizer session: every kernel a test suite runs, captured once and checked.

`Sanitizer.install` registers an observer with pallaslab's lowering rules: every
kernel lowered for the CPU (eagerly, under `jit`, `vmap`, `grad`: JAX lowers what its
transformations made) is keyed by what it is (the compile cache's key: its parameters
and operand types) and decided (`decisions.refusal`). A kernel to check gets a host
callback that copies its operands and results the first time it runs; nothing else
about the program changes, and kernels without an interpreter keep JAX's own error on
a CPU (the plugin changes no test's outcome).

After each test, `finish` checks the programs the test ran for the first time, in
JAX's configuration as it was when they were lowered, and returns them. With
`background`, the emulator's checks run in a thread of their own while the next tests
run (XLA compiles them without holding the GIL, so a second core does the work):
`finish` returns what it checked itself (kernels for JAX's interpreters, whose state
is global, are checked on the tests' thread) and `report` waits for the rest. A test
waits only when checks fall behind (at most `_QUEUED` programs wait their turn).
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
from collections.abc import Collection
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.jax_adapter import observe
from pallaslab._src.core.sanitizer import decisions
from pallaslab._src.core.sanitizer import verify as verify_module
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
        background: Whether the emulator's checks run beside the tests, in a thread
            of their own (findings then reach the report, not the test that ran
            the kernel: not for strict sessions).
    """

    checks: frozenset[str] = frozenset(CHECKS)
    max_bytes: int = decisions.DEFAULT_MAX_BYTES
    hardware: frozenset[str] = frozenset(HARDWARE)
    background: bool = False


class Sanitizer:
    """Captures every kernel program a test suite runs, and checks each once."""

    def __init__(self, options: SanitizerOptions | None = None) -> None:
        self.options = options or SanitizerOptions()
        self._captures: dict[Any, Capture] = {}
        self._unchecked: list[Capture] = []  # in the order first lowered
        self._done: list[tuple[int, SanitizedCall]] = []  # (capture's index, its check)
        self._nodeid = ""
        self._lock = threading.Lock()
        self._installed = False
        self._previous_auto = True
        self._worker: _Worker | None = None
        self._deferred: list[Capture] = []  # given back by the worker: the main thread's

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
        """Stops observing (kernels lowered afterwards are not seen) and checking."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._installed:
            observe.set_observer(None)
            jax_adapter.set_auto_interpret_default(self._previous_auto)
            self._installed = False

    # -- tests ------------------------------------------------------------------

    def begin(self, nodeid: str) -> None:
        """Kernels run from now on are attributed to this test."""
        self._nodeid = nodeid

    def finish(self) -> list[SanitizedCall]:
        """Checks the programs run for the first time since the last `finish`.

        Returns those checked now (with `background`, the others reach `report`).
        """
        # Callbacks of programs still running fire first; a failure of the test's own
        # effects is the test's outcome to report, not the checks'.
        with contextlib.suppress(Exception):
            jax.effects_barrier()
        with self._lock:
            # Only programs not checked yet are looked at: a long suite's finished ones
            # are never scanned again.
            pending = [c for c in self._unchecked if c.runs or c.refused]
            self._unchecked = [c for c in self._unchecked if not (c.runs or c.refused)]
            deferred, self._deferred = self._deferred, []
        if self.options.background:
            pending = [c for c in pending if not self._hand_over(c)]
        here = deferred + pending
        with observe.unobserved():  # the checks' own kernels are not the suite's
            done = [self._verify(capture) for capture in here]
        with self._lock:
            self._done.extend((c.index, call) for c, call in zip(here, done, strict=True))
        self._nodeid = ""
        return done

    def _hand_over(self, capture: Capture) -> bool:
        """Queues a capture for the worker; False when the main thread must check it."""
        if capture.refused or verify_module.needs_main_thread(capture.lowered):
            return False
        if self._worker is None:
            self._worker = _Worker(self)
        self._worker.put(capture)  # waits while the worker is `_QUEUED` behind
        return True

    def _verify(self, capture: Capture, *, on_main_thread: bool = True) -> SanitizedCall:
        call = verify(
            capture, self.options.checks, self.options.hardware, on_main_thread=on_main_thread
        )
        capture.values = None  # checked: the copies go
        return call

    def _checked_in_background(self, capture: Capture) -> None:
        """The worker's turn: checks a capture, or gives it back to the main thread."""
        try:
            with observe.unobserved():
                call = self._verify(capture, on_main_thread=False)
        except verify_module.NeedsMainThreadError:
            with self._lock:
                self._deferred.append(capture)
            return
        with self._lock:
            self._done.append((capture.index, call))

    def drain(self) -> None:
        """Waits for the checks under way, then checks what was given back."""
        if self._worker is not None:
            self._worker.join()
        if self._deferred:
            self.finish()

    def report(self, *, strict: bool = False, failed: tuple[str, ...] = ()) -> SanitizerReport:
        """Everything checked so far (call `finish` first for the last test's).

        Waits for the checks under way; programs are in the order first run.
        """
        self.drain()
        with self._lock:
            calls = [call for _, call in sorted(self._done, key=lambda done: done[0])]
        return SanitizerReport(
            checks=tuple(c for c in CHECKS if c in self.options.checks),
            calls=tuple(calls),
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
                    index=len(self._captures),
                    lowered=lowered,
                    config=observe.config_snapshot(),
                    refused=decisions.refusal(lowered, self.options.max_bytes),
                )
                self._captures[key] = capture
                self._unchecked.append(capture)
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


# Programs waiting for the worker, at most (each holds its operands and results).
_QUEUED = 8


class _Worker:
    """A thread that checks captures in the order given (one at a time)."""

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitizer = sanitizer
        self._queue: queue.Queue[Capture | None] = queue.Queue(maxsize=_QUEUED)
        self._thread = threading.Thread(target=self._run, name="pallaslab-checks", daemon=True)
        self._thread.start()

    def put(self, capture: Capture) -> None:
        self._queue.put(capture)

    def join(self) -> None:
        """Waits until every capture given is checked (or given back)."""
        self._queue.join()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            capture = self._queue.get()
            try:
                if capture is None:
                    return
                self._sanitizer._checked_in_background(capture)  # noqa: SLF001 - its own
            except Exception:  # verify records its failures: this thread never dies
                pass
            finally:
                self._queue.task_done()
