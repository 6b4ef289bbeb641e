"""Hand-made `Operand` and `Kernel` records for the pure-geometry tests (no JAX)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallaslab._src.records import Kernel, Operand
from pallaslab._src.records import indexmap as ix


def operand(
    shape: Sequence[int],
    block: Sequence[int | None],
    outputs: Sequence[ix.Expr],
    *,
    names: Sequence[str] = ("i",),
    kinds: Sequence[str] | None = None,
    role: str = "in",
    position: int = 0,
    name: str | None = None,
    origin: str = "args[0]",
    sizes: tuple[Any, ...] = (),
    **extra: Any,
) -> Operand:
    """An operand whose index map takes the grid indices `names` and returns `outputs`."""
    return Operand(
        position=position,
        role=role,  # type: ignore[arg-type]
        name=f"{role}{position}_ref" if name is None else name,
        origin=origin,
        shape=tuple(shape),
        dtype=extra.pop("dtype", "float32"),
        block_shape=tuple(block),
        block_kinds=tuple(kinds or ["squeezed" if b is None else "blocked" for b in block]),
        index_map=ix.IndexMap(tuple(names), len(names), tuple(outputs), "", sizes=sizes),
        memory_space=extra.pop("memory_space", "default"),
        **extra,
    )


def kernel(grid: Sequence[int], *operands: Operand, **extra: Any) -> Kernel:
    """A pallas_call kernel record with these operands over `grid`."""
    return Kernel(
        index=0,
        name="k",
        kind="pallas_call",
        grid=tuple(grid),
        grid_names=None,
        operands=tuple(operands),
        jaxpr="",
        jaxpr_source_map=(),
        source=None,
        call_site=None,
        **extra,
    )
