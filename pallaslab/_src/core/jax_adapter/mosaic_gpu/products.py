"""Mosaic GPU's matrix products as their equations bind them: shapes, dtypes, layouts.

`wgmma` (`wgmma_ref` before discharge), `tcgen05_mma` and `mma` (a product of values in
registers, jax 0.11+): what each multiplies, read once per equation (it never changes
from run to run). Also what `work.count_work` counts of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pallaslab._src.core.jax_adapter.mosaic_gpu import refs

PRODUCTS = frozenset({"wgmma_ref", "wgmma", "tcgen05_mma", "mma"})
_TCGEN05_TREES = (
    "acc_transforms_tree",
    "a_transforms_tree",
    "b_transforms_tree",
    "barrier_transforms_tree",
    "a_scale_transforms_tree",
    "b_scale_transforms_tree",
    "a_sparse_metadata_transforms_tree",
)


@dataclasses.dataclass(frozen=True)
class Product:
    """One product equation: acc (m, n) += a (m, k) @ b (k, n), per run.

    Attributes:
        kind: "wgmma", "tcgen05" or "dot" (values in registers).
        m, n, k: Its shape (m and n the accumulator's, k the right operand's rows).
        dtypes: (a, b, accumulator) element types.
        lhs_memory: Where a is: "smem", "tmem" or "registers".
        lhs_transforms: a's transforms (its layout in SMEM).
        rhs_transforms: b's.
        collective: The cluster axis of a 2-CTA `tcgen05_mma` ("" if none).
    """

    kind: str
    m: int
    n: int
    k: int
    dtypes: tuple[str, str, str]
    lhs_memory: str
    lhs_transforms: tuple[Any, ...]
    rhs_transforms: tuple[Any, ...]
    collective: str = ""

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def _operand(var: Any, transforms: tuple[Any, ...]) -> tuple[tuple[int, ...] | None, str, Any]:
    """(shape after its transforms, memory, aval) of a ref or a value."""
    aval = var.aval
    if hasattr(aval, "memory_space") or hasattr(aval, "inner_aval"):
        space = refs.memory_space(aval)
        return refs.logical_shape(aval, transforms), "smem" if space == "default" else space, aval
    return tuple(getattr(aval, "shape", ())), "registers", aval


def product(eqn: Any) -> Product | None:
    """What a product equation multiplies; None when its shapes cannot be read."""
    name = eqn.primitive.name
    params = eqn.params
    if name in ("wgmma_ref", "wgmma"):
        acc, lhs, rhs, *leaves = eqn.invars
        trees = [params.get(n) for n in _TCGEN05_TREES[:3]]
        kind, collective = "wgmma", ""
    elif name == "tcgen05_mma":
        acc, lhs, rhs = eqn.invars[:3]
        leading = 4 + bool(params.get("arrive")) + 2 * bool(params.get("scaled"))
        leading += bool(params.get("sparse"))
        leaves = list(eqn.invars[leading:])
        trees = [params.get(n) for n in _TCGEN05_TREES]
        kind, collective = "tcgen05", str(params.get("collective_axis") or "")
    elif name == "mma":
        acc, lhs, rhs = eqn.invars[:3]
        leaves, trees, kind, collective = [], [], "dot", ""
    else:
        return None
    acc_t, lhs_t, rhs_t, *_ = [*refs.split_leaves(leaves, trees), (), (), ()]
    (acc_shape, _, acc_aval), (_, lhs_memory, lhs_aval), (rhs_shape, _, rhs_aval) = (
        _operand(acc, acc_t),
        _operand(lhs, lhs_t),
        _operand(rhs, rhs_t),
    )
    if not acc_shape or len(acc_shape) < 2 or not rhs_shape or len(rhs_shape) < 2:
        return None
    return Product(
        kind=kind,
        m=int(acc_shape[-2]),
        n=int(acc_shape[-1]),
        k=int(rhs_shape[-2]),
        dtypes=(refs.dtype_name(lhs_aval), refs.dtype_name(rhs_aval), refs.dtype_name(acc_aval)),
        lhs_memory=lhs_memory,
        lhs_transforms=lhs_t,
        rhs_transforms=rhs_t,
        collective=collective,
    )
