"""Memory a step after a run needs, said before it starts, and failures that say where.

A run of a large kernel can succeed and the step after it (comparing with the
reference, the emulator's checks) run out of memory: the user then must learn that
the kernel ran, and which step failed, not read "MemoryError". `step` wraps such a
step: where its need is known and more than the machine has free, it fails before it
starts; a memory failure inside it becomes a `StepMemoryError` naming the step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pallaslab._src.base import words


class StepMemoryError(MemoryError):
    """A step after a run needed more memory than there was; the run itself ended."""


def available_bytes() -> int | None:
    """Memory free for new allocations (Linux's MemAvailable), None where unknown."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def shortfall(need: int) -> str:
    """Why `need` bytes do not fit in free memory ("" when they do, or it is unknown)."""
    free = available_bytes()
    if free is None or need <= free:
        return ""
    return f"it needs about {words.nbytes(need)} and {words.nbytes(free)} is free"


def _out_of_memory(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "out of memory" in text


@contextlib.contextmanager
def step(what: str, ran: str, need: int | None = None) -> Iterator[None]:
    """Runs a step after a run; a lack of memory is said with the step and the run.

    Args:
        what: The step ("comparing the outputs with the reference").
        ran: What had happened ("the kernel ran (0.8 s) on cpu").
        need: Bytes the step needs, when known: checked against free memory first.

    Raises:
        StepMemoryError: Before the step when `need` does not fit, or when it ran out
            of memory.
    """
    if need is not None and (missing := shortfall(need)):
        raise StepMemoryError(f"{ran}, but {what} was not started: {missing}.")
    try:
        yield
    except StepMemoryError:
        raise
    except Exception as error:
        if not _out_of_memory(error):
            raise
        free = available_bytes()
        left = f" ({words.nbytes(free)} is free now)" if free is not None else ""
        raise StepMemoryError(f"{ran}, but {what} ran out of memory{left}.") from error
