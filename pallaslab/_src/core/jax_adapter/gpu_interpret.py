"""JAX's Mosaic GPU interpreter: running Mosaic GPU kernels on a CPU, and what it reports.

JAX (from 0.10.0) interprets Mosaic GPU kernels on the CPU, simulating GMEM and SMEM,
the warpgroup threads, barriers and TMA copies: an `InterpretGPUParams` given as
`interpret=` to `plgpu.kernel`, `pl.kernel`/`pl.core_map` on a GPU mesh, or a
`pallas_call` with Mosaic GPU compiler params (not re-exported publicly before 0.12:
`jax._src.pallas.mosaic_gpu.interpret.params`). Pallas' generic interpreter cannot run
such kernels ("run_scoped interpret rule does not support collective axes").

With `detect_races` it runs a happens-before race detector over SMEM and GMEM
accesses (newer releases also over TMA copies and tensor-core operands): each race is
printed (up to JAX's main of August 2026) or logged (0.12, with `on_race="warn"`) as
"RACE DETECTED" with the two accesses' source lines; `race_capture` collects them.
An out-of-bounds read raises (`out_of_bounds_reads="raise"`) or reads NaN
("uninitialized"); an out-of-bounds write always raises. After an exception inside the
interpreter its shared state must be reset before the next kernel (`reset_gpu_interpreter`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import logging
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import jax

from pallaslab._src.core.jax_adapter import probes
from pallaslab._src.records import SourceLocation

_PARAMS_MODULE = "jax._src.pallas.mosaic_gpu.interpret.params"
_CALLBACKS_MODULE = "jax._src.pallas.mosaic_gpu.interpret.gpu_callbacks"
_RACE_MARK = "RACE DETECTED"
# The release that brought the interpreter, for the sentence where a JAX lacks it.
SINCE = "0.10.0"


def params_class() -> Any:
    """`InterpretGPUParams`, or None where this JAX has no Mosaic GPU interpreter."""
    return getattr(probes.optional_module(_PARAMS_MODULE), "InterpretGPUParams", None)


def unavailable() -> str | None:
    """One sentence when this JAX cannot interpret Mosaic GPU kernels, else None."""
    if params_class() is not None:
        return None
    return (
        f"jax {jax.__version__} has no Mosaic GPU interpreter, which runs Mosaic GPU kernels "
        f"on a CPU: it came with jax {SINCE} (jax.experimental.pallas.mosaic_gpu."
        "InterpretGPUParams); run this kernel on a GPU, or use a newer JAX."
    )


def _fields() -> set[str]:
    cls = params_class()
    return {f.name for f in dataclasses.fields(cls)} if cls is not None else set()


def gpu_interpreter_runs(primitive: str) -> bool:
    """Whether this JAX's Mosaic GPU interpreter has a rule for `primitive` ("tcgen05_mma")."""
    rules = probes.optional_module("jax._src.pallas.mosaic_gpu.interpret.jaxpr_interpret")
    name = f"_interpret_{primitive}_p"
    # A function of the module, or a method of its interpreter class (0.12).
    holders = [rules, *(v for v in vars(rules).values() if isinstance(v, type))] if rules else []
    return any(hasattr(holder, name) for holder in holders)


def detects_races() -> bool:
    """Whether this JAX's Mosaic GPU interpreter has a race detector."""
    return "detect_races" in _fields()


# ---------------------------------------------------------------------------
# A failed thread must not leave the others waiting forever.
#
# The interpreter runs a kernel's threads (warpgroups) in a thread pool and waits for
# each in turn; a thread that fails (an operation the interpreter does not support)
# never arrives at the barriers the others wait on, and the run hangs. So each
# thread's failure is noted, and the barriers' waits give up when one is: every
# thread then ends with that failure, which the interpreter raises.

_THREAD_MAP_MODULE = "jax._src.pallas.mosaic.interpret.thread_map"
_SHARED_MEMORY_MODULE = "jax._src.pallas.mosaic_gpu.interpret.shared_memory"
_POLL_S = 0.2
# What failed inside the interpreter during the current (or last) run pallaslab made:
# a kernel thread's failure, or an operation's as JAX logged it. Only while `_active`
# (a run in `race_capture`) do barriers give up on a failure.
_failures: list[BaseException] = []
_active: list[bool] = [False]
_guard_installed: list[str] = []


class _GivingUpCondition(threading.Condition):
    """A condition whose untimed wait ends with a kernel thread's failure, if one fails.

    An untimed wait wakes every `_POLL_S` (a spurious wake-up: the barrier's own loop
    checks its phase again). It must not wait again itself: a notification that
    comes as a timed wait times out is lost to that waiter (CPython's `Condition`),
    and a waiter that only waited again would wait forever.
    """

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            return super().wait(timeout)
        if super().wait(_POLL_S):
            return True
        if _active[0] and _failures:
            raise _failures[0]
        return False


def install_guard() -> None:
    """Wraps the interpreter's thread runner and barriers (once; where this JAX has them)."""
    if _guard_installed:
        return
    threads = probes.optional_module(_THREAD_MAP_MODULE)
    run = getattr(threads, "_run_jaxpr", None)
    if callable(run):

        @functools.wraps(run)
        def run_jaxpr(*args: Any, **kwargs: Any) -> Any:
            try:
                return run(*args, **kwargs)
            except Exception as error:
                if _active[0]:
                    _failures.append(error)
                raise

        threads._run_jaxpr = run_jaxpr
        _guard_installed.append("thread_map._run_jaxpr")
    barrier: Any = getattr(probes.optional_module(_SHARED_MEMORY_MODULE), "Barrier", None)
    init = getattr(barrier, "__init__", None)
    if isinstance(barrier, type) and callable(init):

        @functools.wraps(init)
        def barrier_init(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if type(getattr(self, "cv", None)) is threading.Condition:
                self.cv = _GivingUpCondition()

        barrier.__init__ = barrier_init  # type: ignore[misc]
        _guard_installed.append("shared_memory.Barrier")


def make_params(*, detect_races: bool = True, out_of_bounds_reads: str = "raise") -> Any:
    """The interpreter's params: races reported, not raised; out-of-bounds reads as asked.

    Raises:
        NotImplementedError: Saying which JAX has the interpreter, where this one lacks it.
    """
    cls = params_class()
    if cls is None:
        raise NotImplementedError(unavailable())
    install_guard()
    return cls(
        **checking_options(cls, detect_races=detect_races, out_of_bounds_reads=out_of_bounds_reads)
    )


def checking_options(params_cls: type, **wanted: Any) -> dict[str, Any]:
    """`wanted` (and races reported, not raised) limited to the fields `params_cls` has.

    For either interpreter's params: each JAX has its own subset of these fields.
    """
    # 0.12 raises on the first race by default: keep running and report them all.
    options = {"on_race": "warn", **wanted}
    fields = {f.name for f in dataclasses.fields(params_cls)}
    return {name: value for name, value in options.items() if name in fields}


# Why a Mosaic GPU kernel runs in that interpreter on a CPU, for the run's notice.
GPU_INTERPRETER_WHY = (
    "it is a Mosaic GPU kernel, which pallaslab's emulator and Pallas' generic interpreter "
    "do not run; JAX's interpreter simulates its threads (warpgroups), shared memory, "
    "barriers and TMA copies, with its race detector on"
)


def is_params(value: Any) -> bool:
    """Whether `value` is the Mosaic GPU interpreter's params (an `interpret=` value)."""
    cls = params_class()
    return cls is not None and isinstance(value, cls)


def reset_gpu_interpreter() -> None:
    """Resets the interpreter's shared state (needed after an exception inside it)."""
    callbacks = probes.optional_module(_CALLBACKS_MODULE)
    for name in ("reset_gpu_interpret_mode_state",):
        reset_state = getattr(callbacks, name, None)
        if callable(reset_state):
            reset_state()
            return


# ---------------------------------------------------------------------------
# Races, as the interpreter reports them.


@dataclasses.dataclass(frozen=True)
class GpuRaceAccess:
    """One side of a race the interpreter reported.

    Attributes:
        access: "read" or "write".
        memory: The memory space of the buffer ("SMEM", "GMEM", "TMEM").
        thread: Who accessed it, as the interpreter names it ("0, 1": block, thread).
        location: The kernel's source line that did it (None when not given).
        function: The function that line is in.
    """

    access: str
    memory: str
    thread: str
    location: SourceLocation | None
    function: str = ""


# "write of HostAllocationKey(memory_space_id=1, ...)[()] from 0, 1, /x.py:11:4 (body)";
# an access JAX has no user frame for (a DMA of `sync_copy` in jax 0.10) ends at the
# thread: "write of ('hbm', 102, 0, 0)[()] from 102, 0, ".
_ACCESS = re.compile(
    r"(?P<access>read|write) of (?P<key>.*?)(?:\[(?P<range>.*)\])? from (?P<thread>.*?)"
    r"(?:[,\s]+(?P<file>[^\s,]+?):(?P<line>\d+)(?::\d+)? \((?P<function>[^()]*)\))?[,\s]*$"
)
_MEMORY = re.compile(r"memory_space_id=(\d+)")


def _memory_name(key: str) -> str:
    found = _MEMORY.search(key)
    if not found:
        # Pallas' TPU interpreter's keys: "('hbm', 102, 0, 0)" (a race) or
        # "(0 0 vmem 5)" (an out-of-bounds access: device, core, memory, buffer).
        named = re.search(r"'(\w+)'", key)
        words = key.strip("()").split()
        if named is not None:
            return named.group(1).upper()
        return words[2].rsplit(".", 1)[-1].upper() if len(words) == 4 else ""
    space = _memory_spaces().get(int(found.group(1)))
    return str(getattr(space, "name", space or "")).upper()


def _memory_spaces() -> dict[int, Any]:
    """The interpreter's memory spaces by id.

    `GPU_MEMORY_SPACE_BY_IDX` (jax 0.10), or the inverse of `IDX_BY_GPU_MEMORY_SPACE`
    (in `shared_memory` from 0.12).
    """
    callbacks = probes.optional_module(_CALLBACKS_MODULE)
    by_id = getattr(callbacks, "GPU_MEMORY_SPACE_BY_IDX", None)
    if by_id is not None:
        return dict(by_id)
    for module in (callbacks, probes.optional_module(_SHARED_MEMORY_MODULE)):
        ids = getattr(module, "IDX_BY_GPU_MEMORY_SPACE", None)
        if ids is not None:
            return {index: space for space, index in ids.items()}
    return {}


_WARPGROUP = re.compile(r"block_id=(\d+).*?warpgroup_id=(\d+)(?:.*?warp_id=(\d+))?")


def _thread_name(text: str, unit: str = "thread") -> str:
    """Who made an access, in words.

    "thread 1" (jax 0.10's "0, 1": device, thread) or "warpgroup 1 of block 0"
    (0.12's `Warpgroup(device_id=..., block_id=0, ...)`). Pallas' TPU interpreter
    reports (device, core), "0, 1" or "(0, 1)": with `unit="core"`, "core 1"; it
    numbers each DMA as a device of its own, past the real ones.
    """
    text = text.strip(" ,")
    found = _WARPGROUP.search(text)
    if found is not None:
        block, group, warp = found.groups()
        name = f"warpgroup {group} of block {block}"
        return f"warp {warp} of {name}" if warp is not None else name
    parts = [p.strip() for p in text.strip("()").split(",")]
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        device, index = parts
        name = f"{unit} {index}"
        if device == "0":
            return name
        dma = " (or a DMA, numbered as a device)" if unit == "core" else ""
        return f"{name} of device {device}{dma}"
    return text


def parse_races(text: str, unit: str = "thread") -> list[tuple[GpuRaceAccess, GpuRaceAccess]]:
    """The races in the interpreter's report (pairs of accesses), in order.

    `unit` names who runs the kernel: "thread" (Mosaic GPU), "core" (TPU).
    """
    races = []
    for block in text.split(_RACE_MARK)[1:]:
        accesses = []
        for line in block.splitlines():
            found = _ACCESS.search(line.strip())
            if found is None:
                continue
            accesses.append(
                GpuRaceAccess(
                    access=found.group("access"),
                    memory=_memory_name(found.group("key")),
                    thread=_thread_name(found.group("thread"), unit),
                    location=(
                        SourceLocation(found.group("file"), int(found.group("line")))
                        if found.group("file")
                        else None
                    ),
                    function=found.group("function") or "",
                )
            )
        if len(accesses) >= 2:
            races.append((accesses[0], accesses[1]))
    return races


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if _RACE_MARK in message:
            self.into.append(message)


class _Tee(io.TextIOBase):
    """Stdout that keeps the interpreter's race reports and passes the rest on."""

    def __init__(self, into: list[str], passed: Any) -> None:
        self.into = into
        self.passed = passed
        self._report_ended = False

    def write(self, text: str) -> int:
        if _RACE_MARK in text:
            self.into.append(text)
            self._report_ended = True  # print's own end of line follows
            return len(text)
        if self._report_ended and not text.strip():
            self._report_ended = False
            return len(text)
        self._report_ended = False
        return int(self.passed.write(text))

    def flush(self) -> None:
        self.passed.flush()


class _KeepCallbackFailures(logging.Filter):
    """Keeps the exceptions JAX logs for failed callbacks (the interpreter's), unlogged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("jax.io_callback failed"):
            return True
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            _failures.insert(0, error)  # the operation's own error, before its thread's
        return False


@contextlib.contextmanager
def guarded_gpu_interpreter() -> Iterator[None]:
    """Within the block, kernels the interpreter runs end when one of their threads fails.

    What fails is kept as raised, for `interpreter_failure` to explain, instead of
    JAX logging its traceback (the run's error says it once).
    """
    if _active[0]:  # nested: the outer block guards
        yield
        return
    _failures.clear()  # a new run: nothing has failed
    _active[0] = True
    callbacks = logging.getLogger("jax._src.callback")
    keep = _KeepCallbackFailures()
    callbacks.addFilter(keep)
    try:
        yield
    finally:
        _active[0] = False
        callbacks.removeFilter(keep)


@contextlib.contextmanager
def race_capture(unit: str = "thread") -> Iterator[list[tuple[GpuRaceAccess, GpuRaceAccess]]]:
    """Collects the races the interpreter reports in the block (filled when it ends).

    Reports are printed (older JAX) or logged (0.12): both are taken, neither shown.
    The block is `guarded_gpu_interpreter`. `unit` as `parse_races` takes it.
    """
    texts: list[str] = []
    found: list[tuple[GpuRaceAccess, GpuRaceAccess]] = []
    handler = _Collect(texts)
    root = logging.getLogger()
    root.addHandler(handler)
    previous = sys.stdout
    sys.stdout = _Tee(texts, previous)
    try:
        with guarded_gpu_interpreter():
            yield found
    finally:
        sys.stdout = previous
        root.removeHandler(handler)
        found.extend(parse_races("\n".join(texts), unit))


# ---------------------------------------------------------------------------
# Out-of-bounds accesses, as the interpreter raises them.


@dataclasses.dataclass(frozen=True)
class OutOfBoundsAccess:
    """An out-of-bounds access the interpreter raised.

    Attributes:
        access: "load" or "store".
        memory: The buffer's memory space ("GMEM", "SMEM").
        span: Per dimension, the first and last element asked for.
        shape: The buffer's shape.
        location: The kernel's source line (None when the error does not say).
        text: The interpreter's message.
    """

    access: str
    memory: str
    span: tuple[tuple[int, int], ...]
    shape: tuple[int, ...]
    location: SourceLocation | None
    text: str


# "Out-of-bounds read of HostAllocationKey(...): reading [...] but buffer has shape (4,)"
# (the Mosaic GPU interpreter); "Out-of-bounds write of (0 0 vmem 5): writing [...] but
# buffer has shape (10, 128)" (Pallas' TPU interpreter: device, core, memory, buffer).
_OOB = re.compile(
    r"Out-of-bounds (?P<what>read|write|swap|masked swap) of "
    r"(?P<key>HostAllocationKey\([^)]*\)|\([^)]*\))"
    r".*?(?:reading|writing|swapping) \[(?P<range>.*)\] but buffer has shape (?P<shape>\([^)]*\))"
)
_SLICE = re.compile(r"slice\((-?\d+), (-?\d+)(?:, -?\d+)?\)|(?<![\w(])(-?\d+)(?![\w)])")


def _span(range_text: str) -> tuple[tuple[int, int], ...]:
    spans = []
    for found in _SLICE.finditer(range_text):
        if found.group(1) is not None:
            spans.append((int(found.group(1)), int(found.group(2)) - 1))
        elif found.group(3) is not None:
            spans.append((int(found.group(3)), int(found.group(3))))
    return tuple(spans)


def interpreter_out_of_bounds(error: BaseException) -> OutOfBoundsAccess | None:
    """The interpreter's out-of-bounds access behind `error` (or its causes), if any.

    The access as the interpreter raised it (kept from its log or its thread), whose
    cause names the kernel's line; else as the error's text quotes it.
    """
    first: OutOfBoundsAccess | None = None
    for candidate in (*_kept_for(error), error):
        seen: BaseException | None = candidate
        for _ in range(8):
            if seen is None:
                break
            found = _OOB.search(str(seen))
            if found is not None:
                location = _user_line_of_chain(candidate) or _kernel_line_in_text(str(seen))
                shape = tuple(int(n) for n in re.findall(r"-?\d+", found.group("shape")))
                access = OutOfBoundsAccess(
                    access="load" if found.group("what") == "read" else "store",
                    memory=_memory_name(found.group("key")),
                    span=_span(found.group("range")),
                    shape=shape,
                    location=location,
                    text=found.group(0),
                )
                if location is not None:
                    return access
                # The same access may be kept again with its kernel line (the
                # thread's own exception, after the callback's quoted one).
                first = first or access
                break
            seen = seen.__cause__ or seen.__context__
    if first is not None:
        return first
    if _partial_swap(error):
        return OutOfBoundsAccess("store", "", (), (), None, "an out-of-bounds swap")
    return None


def _partial_swap(error: BaseException) -> bool:
    """A store reaching past the end of its buffer, as jax 0.10's interpreter fails it.

    Before JAX reported such a store as an out-of-bounds swap, it tripped an assertion
    in `swap_buffer_content` (the part that fits is not the value's shape).
    """
    for candidate in (*_kept_for(error), error):
        text = str(candidate)
        if "AssertionError" in text and "in swap_buffer_content" in text:
            return True
        if isinstance(candidate, AssertionError):
            frame = candidate.__traceback__
            while frame is not None:
                if frame.tb_frame.f_code.co_name == "swap_buffer_content":
                    return True
                frame = frame.tb_next
    return False


# A frame of a traceback printed in an error's text: `File "/x.py", line 8, in body`.
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _kernel_line_in_text(text: str) -> SourceLocation | None:
    """The last frame outside JAX and pallaslab of the traceback the text quotes."""
    found = None
    for frame in _FRAME.finditer(text):
        file = frame.group("file")
        if not any(part in file for part in _LIBRARY_PATHS):
            found = SourceLocation(file, int(frame.group("line")))
    return found


# Paths of files that are no kernel author's: JAX's, pallaslab's, Python's, IPython's.
_LIBRARY_PATHS = ("/jax/", "/jaxlib/", "/pallaslab/", "/site-packages/", "/lib/python3")
_LIBRARY_MODULES = ("jax", "pallaslab", "IPython", "ipykernel", "concurrent", "threading")


def _user_line(error: BaseException) -> SourceLocation | None:
    """The last frame outside JAX and pallaslab in the error's traceback."""
    found = None
    frame = error.__traceback__
    while frame is not None:
        name = str(frame.tb_frame.f_globals.get("__name__", ""))
        file = frame.tb_frame.f_code.co_filename
        if not name.startswith(_LIBRARY_MODULES) and not any(p in file for p in _LIBRARY_PATHS):
            found = SourceLocation(frame.tb_frame.f_code.co_filename, frame.tb_lineno)
        frame = frame.tb_next
    return found


def _user_line_of_chain(error: BaseException) -> SourceLocation | None:
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if type(seen).__name__ == "JaxStackTraceBeforeTransformation":
            return _user_line(seen)
        seen = seen.__cause__ or seen.__context__
    return None


# ---------------------------------------------------------------------------
# Other failures inside the interpreter.


@dataclasses.dataclass(frozen=True)
class InterpreterFailure:
    """An error raised inside JAX's Mosaic GPU interpreter while it ran a kernel.

    Attributes:
        kind: The exception's type ("NotImplementedError").
        message: Its message (the first line).
        location: The kernel's source line it was raised for, when known.
    """

    kind: str
    message: str
    location: SourceLocation | None


_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<message>.+)$")
_INTERPRETER_FRAME = "/pallas/mosaic_gpu/interpret/"


def forget_failures() -> None:
    """Forgets what failed in the last run (before running again in the same capture)."""
    _failures.clear()


def _kept_for(error: BaseException) -> list[BaseException]:
    """The failures kept from the last run, if `error` is that run's callback failure."""
    if _failures and ("CpuCallback error" in str(error) or error in _failures):
        return list(_failures)
    return []


def _raised_inside(error: BaseException) -> bool:
    """Whether the interpreter's own code raised `error` (while it traced the kernel)."""
    frame = error.__traceback__
    while frame is not None:
        if _INTERPRETER_FRAME in frame.tb_frame.f_code.co_filename:
            return True
        frame = frame.tb_next
    return False


def interpreter_failure(error: BaseException) -> InterpreterFailure | None:
    """What failed inside the interpreter behind `error`, if it failed there.

    The interpreter runs the kernel in callbacks: XLA gives back their failure as text
    (its traceback quoted in the message); the failure of one of the kernel's threads
    is also kept as it was raised (`_failures`), with the kernel line JAX names.
    """
    text = str(error)
    kept = _kept_for(error)
    original = kept[0] if kept else None
    if _INTERPRETER_FRAME not in text and original is None and not _raised_inside(error):
        return None
    location = None
    kind, message = type(error).__name__, text.strip().splitlines()[0] if text.strip() else ""
    if original is not None:
        kind = type(original).__name__
        message = (str(original).strip().splitlines() or [""])[0]
        location = _user_line_of_chain(original)
    else:
        raised = [m for line in text.splitlines() if (m := _RAISED.match(line.strip()))]
        if raised:
            kind, message = raised[-1]["type"].rsplit(".", 1)[-1], raised[-1]["message"]
    location = location or _user_line_of_chain(error) or _kernel_line_in_text(text)
    return InterpreterFailure(kind, message, location)
