"""The run budget: how long a kernel's loops may run, and interrupts that leave no wedge.

A kernel whose `while_loop` never ends would hang the cell, and an interrupt alone
cannot stop it: the computation runs on inside XLA and every later one queues behind
it. The emulator and pallaslab's interpreter bound every `while` loop of a kernel
(`jax_adapter.loop_budget`); this module sets the bound and the wall-clock limit
(`set_run_budget`), and `watched` runs a computation under them:

- a loop that runs past its iterations, or past the run's deadline, stops, and the
  run fails with `RunStoppedError` naming the loop's line and what it ran;
- on an interrupt (SIGINT: Jupyter's stop button), every bounded loop is asked to
  stop, the computation is let drain (within `DRAIN_SECONDS`), and the interrupt
  goes on as a `KeyboardInterrupt`: the next cell finds XLA idle.

Kernels compiled for a GPU or a TPU run as the hardware runs them: their loops are
not bounded, and XLA cannot stop them (the budget says so in `describe`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import jax

from pallaslab._src.base import sources
from pallaslab._src.core.jax_adapter import loop_budget
from pallaslab._src.records import SourceLocation

#: Seconds an interrupted computation is given to stop its loops and end.
DRAIN_SECONDS = 5.0


@dataclasses.dataclass(frozen=True)
class RunBudget:
    """How long a kernel may run, emulated or interpreted (on a CPU, or `--interpret`).

    Attributes:
        loop_iterations: Iterations each `while` loop (or `fori_loop` with bounds
            known only when it runs) of a kernel may run, in each program.
        seconds: Wall-clock seconds one run (a cell's run, `emulate`, a check) may
            take; None for no limit.
    """

    loop_iterations: int = loop_budget.DEFAULT_ITERATIONS
    seconds: float | None = None

    def describe(self) -> str:
        """The budget in words."""
        limit = f"{self.seconds:g} s a run" if self.seconds is not None else "no time limit"
        return (
            f"{self.loop_iterations:,} iterations per loop, {limit} (emulated and "
            "interpreted kernels; a GPU or TPU runs its kernels as compiled)"
        )


_budget = RunBudget()
_lock = threading.Lock()
_draining = threading.Event()  # an interrupted computation has not ended yet


def run_budget() -> RunBudget:
    """The run budget in force."""
    return _budget


# `seconds` left out: the current limit stays (None means no limit).
_UNCHANGED: Any = object()


def set_run_budget(
    loop_iterations: int | None = None, seconds: float | None = _UNCHANGED
) -> RunBudget:
    """Sets how long kernels may run when emulated or interpreted; returns the budget.

    A loop that runs past its iterations, or a run past its seconds, stops, and the
    run fails with a message naming the loop's line ("the loop at line 12 ran
    10,000,000 iterations"). An interrupt (Jupyter's stop button) stops the loops of
    the run at hand whatever the budget, so the next cell runs at once.

    Args:
        loop_iterations: Iterations each `while` loop may run per program (default
            10,000,000; at least 1,000: loops first ask after 1,000 iterations).
            None keeps the current value.
        seconds: Wall-clock seconds a run may take; None for no limit. Left out, the
            current value is kept.

    Example:
        >>> pallaslab.set_run_budget(loop_iterations=100_000, seconds=30)
    """
    global _budget, _explicit  # noqa: PLW0603
    iterations = _budget.loop_iterations if loop_iterations is None else int(loop_iterations)
    if iterations < loop_budget.FIRST_CHUNK:
        raise ValueError(
            f"loop_iterations must be at least {loop_budget.FIRST_CHUNK:,} (loops first "
            f"ask whether to go on after {loop_budget.FIRST_CHUNK:,} iterations), not "
            f"{loop_iterations!r}"
        )
    limit = _budget.seconds if seconds is _UNCHANGED else seconds
    if limit is not None and (isinstance(limit, bool) or not float(limit) > 0):
        raise ValueError(f"seconds must be a positive number or None, not {seconds!r}")
    _budget = RunBudget(iterations, None if limit is None else float(limit))
    _explicit = True
    loop_budget.set_limits(_budget.loop_iterations, None)
    return _budget


_explicit = False  # set_run_budget was called: the settings no longer apply


def follow_setting(loop_iterations: int, seconds: float | None) -> None:
    """The JupyterLab settings' budget, unless `set_run_budget` set one this session."""
    global _budget  # noqa: PLW0603
    if _explicit:
        return
    iterations = max(loop_budget.FIRST_CHUNK, int(loop_iterations))
    _budget = RunBudget(iterations, None if not seconds else float(seconds))
    loop_budget.set_limits(_budget.loop_iterations, None)


class RunStoppedError(RuntimeError):
    """A run stopped by the budget: a loop ran too long, or the run did.

    Attributes:
        stops: The loops stopped, longest first.
        location: The source line of the first one, when known.
        budget: The budget in force.
    """

    def __init__(self, stops: list[loop_budget.LoopStop], budget: RunBudget) -> None:
        self.stops = stops
        self.budget = budget
        first = stops[0]
        self.location = SourceLocation(first.file, first.line) if first.line else None
        super().__init__(_stopped_message(stops, budget))


def _stopped_message(stops: list[loop_budget.LoopStop], budget: RunBudget) -> str:
    first = stops[0]
    where = f"the loop at line {first.line}" if first.line else "a loop of the kernel"
    if first.file and first.line and sources.cell_label(first.file) is None:
        where = f"the loop at {sources.label(first.file)}:{first.line}"
    ran = f"ran {first.iterations:,} iterations"
    if first.reason == "iterations":
        why = (
            f"{where} {ran} (the run budget: {budget.loop_iterations:,} per loop) and was "
            "stopped; its outputs are not kept"
        )
    else:
        why = (
            f"the run took longer than its budget of {budget.seconds:g} s: {where} had "
            f"{ran} when it was stopped; its outputs are not kept"
        )
    others = len(stops) - 1
    if others:
        why += f" ({others} more loop{'s' if others > 1 else ''} stopped too)"
    return why + "."


def hint(error: RunStoppedError) -> str:
    """What to do about a stopped run."""
    if error.stops[0].reason == "iterations":
        return (
            "Does the loop's condition ever turn false? If it is meant to run longer, "
            "raise the budget: pallaslab.set_run_budget(loop_iterations=...)."
        )
    return "Raise the limit with pallaslab.set_run_budget(seconds=...), or seconds=None."


@contextlib.contextmanager
def watched() -> Iterator[None]:
    """Runs the block's computations under the budget, interruptible without a wedge.

    The block's computations have ended when it exits (it waits for them).

    Raises:
        RunStoppedError: When a loop was stopped by the budget.
        KeyboardInterrupt: On an interrupt, once the computation has drained (or
            `DRAIN_SECONDS` have passed).
    """
    if not _draining_done(DRAIN_SECONDS):
        raise RuntimeError(
            "an interrupted computation is still running inside XLA (it has no loop "
            "pallaslab can stop); restart the kernel to stop it"
        )
    _raise_pending_interrupt()
    budget = _budget
    deadline = time.monotonic() + budget.seconds if budget.seconds is not None else None
    with _lock:
        loop_budget.take_stops()  # stale stops of a run nobody watched
        loop_budget.set_limits(budget.loop_iterations, deadline)
    try:
        with interruptible():
            yield
            _sync()  # what the block started has ended: its loops have reported
            stops = loop_budget.take_stops()
            _raise_pending_interrupt()
    except KeyboardInterrupt:
        _drain()
        raise
    finally:
        loop_budget.set_limits(budget.loop_iterations, None)
    if stops:
        raise RunStoppedError(stops, budget)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block, an interrupt (SIGINT) also stops every bounded loop.

    The interrupt is raised as usual, except inside a host callback of a running
    computation, where it would fail the callback (and the run, with a confusing
    error) or be lost (in a garbage-collection callback): there it is held, the loops
    stop at their next question, and `watched` (or the end of this block) raises it.
    Main thread only; nested blocks share the outermost handler.
    """
    global _handler_installed  # noqa: PLW0603
    if _handler_installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> Any:
        if previous is signal.SIG_IGN:
            return None
        loop_budget.request_stop("interrupt")
        if _in_callback(frame):
            return None
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:  # not the main interpreter's thread after all
        yield
        return
    _handler_installed = True
    try:
        yield
        _raise_pending_interrupt()
    finally:
        _handler_installed = False
        signal.signal(signal.SIGINT, previous)


_handler_installed = False


def _raise_pending_interrupt() -> None:
    """Raises an interrupt that was held (see `interruptible`), once."""
    if loop_budget.stop_requested() == "interrupt" and not _draining.is_set():
        loop_budget.clear_stop()
        loop_budget.take_stops()
        raise KeyboardInterrupt


# Where Python runs as a callback: XLA's host callbacks, and garbage collection.
_CALLBACK_FILES = ("jax/_src/callback.py", "jax/_src/debugging.py", "jax/_src/lib/__init__.py")


def _in_callback(frame: FrameType | None) -> bool:
    """Whether Python code runs as a host callback of a computation (XLA called it)."""
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if name.endswith(_CALLBACK_FILES) or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


#: How often a wait for a computation looks up (and lets the main thread take a SIGINT).
POLL_SECONDS = 0.02


def ready(tree: Any) -> Any:
    """`jax.block_until_ready`, waiting where the main thread can take an interrupt.

    On a CPU, XLA may run a computation on a thread of its own, and its host callbacks
    (the loops' questions) there too: a main thread blocked inside XLA would never run
    Python's SIGINT handler, so the interrupt would wait for a loop that only the
    interrupt can stop. Polling keeps the main thread in Python.
    """
    arrays = [x for x in jax.tree_util.tree_leaves(tree) if callable(getattr(x, "is_ready", None))]
    while not all(x.is_ready() for x in arrays):
        time.sleep(POLL_SECONDS)
    return jax.block_until_ready(tree)


def _sync() -> None:
    """Waits for the computations started so far (and their callbacks) to end."""
    # XLA runs a device's computations in order: this one ends after them.
    ready(jax.numpy.zeros((), jax.numpy.int32) + 1)
    jax.effects_barrier()


def _drain() -> None:
    """Lets an interrupted computation end: its loops stop; XLA runs in order."""
    loop_budget.request_stop("interrupt")
    _draining.set()

    def wait() -> None:
        try:
            _sync()
        finally:
            loop_budget.clear_stop()
            loop_budget.take_stops()
            _draining.clear()

    waiter = threading.Thread(target=wait, name="pallaslab-drain", daemon=True)
    waiter.start()
    waiter.join(DRAIN_SECONDS)


def _draining_done(seconds: float) -> bool:
    """Waits up to `seconds` for an interrupted computation to end; whether it has."""
    deadline = time.monotonic() + seconds
    while _draining.is_set():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
