"""Small text formatters shared by the views."""

from __future__ import annotations

from collections.abc import Sequence

from pallaslab._src.records import Operand, short_dtype


def shape(dims: Sequence[int | None]) -> str:
    """`(128, None)`; one-element shapes keep their comma: `(128,)`."""
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def array_type(dtype: str, dims: Sequence[int]) -> str:
    """`f32[1024,128]`, as jaxprs write it."""
    return f"{short_dtype(dtype)}[{','.join(str(d) for d in dims)}]"


def seconds(value: float) -> str:
    """`12.3 ms`, `1.20 s`."""
    if value < 1e-3:
        return f"{value * 1e6:.0f} us"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def number(value: float | None) -> str:
    """A float in 4 significant digits ('-' for None)."""
    return "-" if value is None else f"{value:.4g}"


def operand_block(operand: Operand) -> str:
    """The block shape, or "whole" when the block is the array."""
    if operand.role == "scratch" or all(k == "full" for k in operand.block_kinds):
        return "whole"
    return shape(operand.block_shape)


def index_map_text(operand: Operand) -> str:
    """The index map as the user wrote it, or what JAX's default one means.

    An operand without a BlockSpec (or with one without an index map) gets JAX's
    own index map: say so, rather than show code no one wrote.
    """
    index_map = operand.index_map
    if index_map is None:
        return ""
    if not index_map.default:
        return index_map.text
    whole = all(
        b is not None and b == d for b, d in zip(operand.block_shape, operand.shape, strict=True)
    )
    return "default BlockSpec: the whole array" if whole else "no index map: block 0"
