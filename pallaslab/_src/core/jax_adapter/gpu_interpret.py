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
import importlib
import io
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import jax

from pallaslab._src.records import SourceLocation

_PARAMS_MODULE = "jax._src.pallas.mosaic_gpu.interpret.params"
_CALLBACKS_MODULE = "jax._src.pallas.mosaic_gpu.interpret.gpu_callbacks"
_RACE_MARK = "RACE DETECTED"
# The release that brought the interpreter, for the sentence where a JAX lacks it.
SINCE = "0.10.0"


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on the JAX version
        return None


def params_class() -> Any:
    """`InterpretGPUParams`, or None where this JAX has no Mosaic GPU interpreter."""
    return getattr(_optional(_PARAMS_MODULE), "InterpretGPUParams", None)


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


def detects_races() -> bool:
    """Whether this JAX's Mosaic GPU interpreter has a race detector."""
    return "detect_races" in _fields()


def make_params(*, detect_races: bool = True, out_of_bounds_reads: str = "raise") -> Any:
    """The interpreter's params: races reported, not raised; out-of-bounds reads as asked.

    Raises:
        NotImplementedError: Saying which JAX has the interpreter, where this one lacks it.
    """
    cls = params_class()
    if cls is None:
        raise NotImplementedError(unavailable())
    fields = _fields()
    options: dict[str, Any] = {}
    if "detect_races" in fields:
        options["detect_races"] = detect_races
    if "on_race" in fields:  # 0.12: "raise" by default; keep running, report them all
        options["on_race"] = "warn"
    if "out_of_bounds_reads" in fields:
        options["out_of_bounds_reads"] = out_of_bounds_reads
    return cls(**options)


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
    callbacks = _optional(_CALLBACKS_MODULE)
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


# "write of HostAllocationKey(memory_space_id=1, ...)[()] from 0, 1, /x.py:11:4 (body)"
_ACCESS = re.compile(
    r"(?P<access>read|write) of (?P<key>.*?)(?:\[(?P<range>.*)\])? from (?P<thread>.*?)[,\s]+"
    r"(?P<file>[^\s,]+):(?P<line>\d+)(?::\d+)? \((?P<function>[^()]*)\)\s*$"
)
_MEMORY = re.compile(r"memory_space_id=(\d+)")


def _memory_name(key: str) -> str:
    found = _MEMORY.search(key)
    if not found:
        return ""
    spaces = getattr(_optional(_CALLBACKS_MODULE), "GPU_MEMORY_SPACE_BY_IDX", {})
    space = spaces.get(int(found.group(1)))
    return str(getattr(space, "name", space or "")).upper()


def parse_races(text: str) -> list[tuple[GpuRaceAccess, GpuRaceAccess]]:
    """The races in the interpreter's report (pairs of accesses), in order."""
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
                    thread=found.group("thread").strip(" ,"),
                    location=SourceLocation(found.group("file"), int(found.group("line"))),
                    function=found.group("function"),
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


@contextlib.contextmanager
def race_capture() -> Iterator[list[tuple[GpuRaceAccess, GpuRaceAccess]]]:
    """Collects the races the interpreter reports in the block (filled when it ends).

    Reports are printed (older JAX) or logged (0.12): both are taken, neither shown.
    """
    texts: list[str] = []
    found: list[tuple[GpuRaceAccess, GpuRaceAccess]] = []
    handler = _Collect(texts)
    root = logging.getLogger()
    root.addHandler(handler)
    previous = sys.stdout
    sys.stdout = _Tee(texts, previous)
    try:
        yield found
    finally:
        sys.stdout = previous
        root.removeHandler(handler)
        found.extend(parse_races("\n".join(texts)))


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


_OOB = re.compile(
    r"Out-of-bounds (?P<what>read|swap|masked swap) of (?P<key>HostAllocationKey\([^)]*\))"
    r".*?(?:reading|swapping) \[(?P<range>.*)\] but buffer has shape (?P<shape>\([^)]*\))"
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
    """The interpreter's out-of-bounds access behind `error` (or its causes), if any."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        found = _OOB.search(str(seen))
        if found is not None:
            location = _user_line_of_chain(error) or _kernel_line_in_text(str(seen))
            shape = tuple(int(n) for n in re.findall(r"-?\d+", found.group("shape")))
            return OutOfBoundsAccess(
                access="load" if found.group("what") == "read" else "store",
                memory=_memory_name(found.group("key")),
                span=_span(found.group("range")),
                shape=shape,
                location=location,
                text=found.group(0),
            )
        seen = seen.__cause__ or seen.__context__
    return None


# A frame of a traceback printed in an error's text: `File "/x.py", line 8, in body`.
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _kernel_line_in_text(text: str) -> SourceLocation | None:
    """The last frame outside JAX and pallaslab of the traceback the text quotes."""
    found = None
    for frame in _FRAME.finditer(text):
        file = frame.group("file")
        if "/jax/" not in file and "/jaxlib/" not in file and "/pallaslab/" not in file:
            found = SourceLocation(file, int(frame.group("line")))
    return found


def _user_line(error: BaseException) -> SourceLocation | None:
    """The last frame outside JAX and pallaslab in the error's traceback."""
    found = None
    frame = error.__traceback__
    while frame is not None:
        name = str(frame.tb_frame.f_globals.get("__name__", ""))
        if not name.startswith(("jax", "pallaslab")):
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
