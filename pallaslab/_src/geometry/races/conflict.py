"""A race found: `Conflict`, the backends whose rules it breaks, and its words."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from pallaslab._src.base import words
from pallaslab._src.geometry.races.windows import block_index
from pallaslab._src.records import Operand

Backend = Literal["gpu", "tpu"]
BACKENDS: tuple[Backend, ...] = ("gpu", "tpu")
# Conflicts found element by element, between programs sharing an output's memory.
ELEMENT_KINDS = frozenset({"element-store", "element-read", "element-atomic"})


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Programs that touch the same block of an output where the backend forbids it.

    Attributes:
        backend: "gpu" or "tpu": whose rules this breaks.
        kind: "parallel-write" (programs that may run at the same time write the
            block), "revisit" (TPU: the block is left and written again later) or
            "aliased-read" (a block of an input aliased to an output, read by a
            program after another wrote it as the output; `programs` are the writer
            and the reader).
        operand: The output's label (its kernel parameter name).
        position: The output's position among the kernel's operands.
        block: The block's index in the output's block grid (element offsets along
            element-indexed dimensions).
        start: The block's first element, per dimension.
        programs: The programs that write it, in grid order.
        axes: The grid axes along which those programs differ.
        elements: For element-level conflicts ("element-store": two programs store
            the same elements; "element-read": a program loads elements another
            stores; "element-atomic": elements updated atomically are also loaded
            or stored plainly by another program), how many elements; 0 for blocks.
        span: For element-level conflicts, per dimension the first and last
            element involved; `start` is the first of them, `block` its block.
    """

    backend: str
    kind: str
    operand: str
    position: int
    block: tuple[int, ...]
    start: tuple[int, ...]
    programs: tuple[tuple[int, ...], ...]
    axes: tuple[int, ...]
    elements: int = 0
    span: tuple[tuple[int, int], ...] = ()

    @property
    def element_level(self) -> bool:
        """Whether this conflict was found element by element (shared memory)."""
        return self.kind in ELEMENT_KINDS

    def describe(self, axis_names: Sequence[str] = ()) -> str:
        """One sentence naming the block, its programs and why they conflict."""
        shown = ", ".join(tuple_text(p) for p in self.programs[:4])
        more = f" and {len(self.programs) - 4} more" if len(self.programs) > 4 else ""
        axes = axes_text(self.axes, axis_names)
        if self.element_level:
            first, second = (tuple_text(p) for p in (*self.programs, self.programs[-1])[:2])
            what = f"{span_text(self.span)} of {self.operand} ({self.elements} element(s))"
            verb = {
                "element-store": f"are stored by both programs {first} and {second}",
                "element-read": f"are stored by program {first} and read by program {second}",
                "element-atomic": (
                    f"are updated atomically and also loaded or stored plainly by programs "
                    f"{first} and {second}"
                ),
            }[self.kind]
            return (
                f"{what} {verb}, which may run at the same time on "
                f"{self.backend.upper()} (they differ along {axes})."
            )
        where = f"block {tuple_text(self.block)} of {self.operand}"
        if self.kind == "aliased-read":
            writer, reader = (tuple_text(p) for p in (*self.programs, self.programs[-1])[:2])
            when = (
                f"after program {writer} wrote it as the output"
                if self.backend == "tpu"
                else f"while program {writer} writes it as the output (they may run at once)"
            )
            return (
                f"{where} (an input aliased to an output) is read by program {reader} {when}: "
                "whether it reads that result or the original depends on when the write "
                f"reaches memory on {self.backend.upper()} (Pallas' interpreter always reads "
                "the original)."
            )
        if self.kind == "revisit":
            return (
                f"{where} is left and written again later by programs {shown}{more} "
                f"(along {axes}); a TPU writes an output block back when the next "
                "program's block differs and does not read it back on return."
            )
        return (
            f"{where} is written by {len(self.programs)} programs that may run at the "
            f"same time on {self.backend.upper()}: {shown}{more} (they differ along {axes})."
        )


def conflict_at(  # noqa: PLR0917 - a conflict's fields, in order
    backend: str,
    kind: str,
    operand: Operand,
    start: tuple[int, ...],
    programs: tuple[tuple[int, ...], ...],
    axes: tuple[int, ...],
    elements: int = 0,
    span: tuple[tuple[int, int], ...] = (),
) -> Conflict:
    """The conflict of `programs` on the block of `operand` holding element `start`."""
    return Conflict(
        backend=backend,
        kind=kind,
        operand=operand.label,
        position=operand.position,
        block=block_index(operand, start),
        start=start,
        programs=programs,
        axes=axes,
        elements=elements,
        span=span,
    )


def span_text(span: Sequence[tuple[int, int]]) -> str:
    if not span:
        return "the element"
    parts = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in span]
    if len(parts) == 1:
        return f"element{'s' if '..' in parts[0] else ''} {parts[0]}"
    return "elements [" + ", ".join(parts) + "]"


def axes_text(axes: Sequence[int], names: Sequence[str]) -> str:
    parts = []
    for axis in axes:
        name = names[axis] if axis < len(names) else ""
        parts.append(
            f"grid axis {axis}" + (f" ({name})" if name and name != f"axis {axis}" else "")
        )
    return words.and_list(parts) if parts else "no axis"


def tuple_text(values: Sequence[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
