"""Plain records of performance hints: why a kernel may be slow, and where.

A `Hint` is one piece of advice tied to a source line, with the figures behind it
and the chip it assumes. `DotInfo` and `MaskUse` are facts the core reads from a
kernel (its matrix products, its masked loads and stores) for the rules in
`geometry/hints/`. Only Python values here (no JAX).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pallaslab._src.records import SourceLocation

Severity = Literal["error", "warning", "info"]
#: Most severe first.
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
FigureValue = int | float | str


@dataclasses.dataclass(frozen=True)
class Hint:
    """One piece of performance advice about a kernel.

    Attributes:
        id: A stable identifier of the rule ("tpu-tiling", "dot-upcast" ...), for
            scripts and filters; not shown in messages.
        severity: "error" (the chip cannot run the kernel as written), "warning"
            (likely a large slowdown) or "info" (worth a look).
        message: The advice in plain words: what, why, and what to change.
        location: The source line it is about (a BlockSpec's index map, a dot,
            the pallas_call), when known.
        figures: The numbers behind it, as (name, value) pairs.
        chip: The chip the advice assumes ("H100", "v5e").
        kernel: The kernel's name.
        kernel_index: The kernel's index in the inspection.
        subjects: What the advice is about, when it is several of a kind: every
            operand one hint names ("a_ref", "b_ref"), rather than a hint each.
        locations: Every source line it is about (`location` is the first).
    """

    id: str
    severity: Severity
    message: str
    location: SourceLocation | None
    figures: tuple[tuple[str, FigureValue], ...] = ()
    chip: str = ""
    kernel: str = ""
    kernel_index: int = 0
    subjects: tuple[str, ...] = ()
    locations: tuple[SourceLocation, ...] = ()

    def figure(self, name: str) -> FigureValue:
        """The figure called `name`.

        Raises:
            KeyError: Naming the figures, when there is none called so.
        """
        for key, value in self.figures:
            if key == name:
                return value
        raise KeyError(f"no figure {name!r}; figures: {', '.join(k for k, _ in self.figures)}")

    def describe(self) -> str:
        """`file:line: warning: message`, as compilers print it ("Cell [3] line 10: ...")."""
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.severity}: {self.message}"

    def __str__(self) -> str:
        return self.describe()


@dataclasses.dataclass(frozen=True)
class DotInfo:
    """One matrix product in a kernel body, as its jaxpr has it.

    Attributes:
        m: Rows of the product (lhs free dimensions, multiplied).
        n: Columns (rhs free dimensions).
        k: The contracted length.
        batch: Batch dimensions' size (1 for none).
        lhs_dtype: The left operand's dtype as the dot sees it.
        rhs_dtype: The right operand's dtype.
        out_dtype: The result's dtype (`preferred_element_type`, or the inputs').
        lhs_from: The narrower dtype the left operand was converted from just
            before the dot ("bfloat16" for `x.astype(jnp.float32)`), "" if none.
        rhs_from: The same for the right operand.
        accumulated: Whether the result is summed into something (an add, maybe
            after a conversion): the partial products of a k loop.
        widened_to: The dtype the result is converted to right after ("float32"
            for `jnp.dot(a, b).astype(jnp.float32)`), "" if none.
        location: The dot's source line.
    """

    m: int
    n: int
    k: int
    batch: int
    lhs_dtype: str
    rhs_dtype: str
    out_dtype: str
    lhs_from: str = ""
    rhs_from: str = ""
    accumulated: bool = False
    widened_to: str = ""
    location: SourceLocation | None = None


@dataclasses.dataclass(frozen=True)
class MaskUse:
    """How much of one masked load or store is switched on, over sampled programs.

    Attributes:
        kind: "read", "write" or "update".
        ref: The buffer's label ("x_ref").
        lanes: Lanes of one access (elements of the value loaded or stored).
        enabled: Lanes switched on, over every sampled access of this line.
        total: Lanes over every sampled access of this line.
        accesses: Sampled accesses of this line.
        programs: Programs sampled.
        location: The load's or store's source line.
    """

    kind: str
    ref: str
    lanes: int
    enabled: int
    total: int
    accesses: int
    programs: int
    location: SourceLocation | None = None

    @property
    def fraction(self) -> float:
        """Share of lanes switched on (0..1)."""
        return self.enabled / self.total if self.total else 1.0
