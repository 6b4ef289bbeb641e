"""What the walker records: TMA copies, GMEM loads and stores, `wgmma` and `tcgen05_mma`.

Each handler reads its equation as its primitive binds it in JAX's Mosaic GPU
`primitives.py` (refs first, then every transform's leaves, cut by the treedefs in
its params) and hands the walker the window and the shapes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.mosaic_gpu import refs, values
from pallaslab._src.core.jax_adapter.mosaic_gpu.products import PRODUCTS, product
from pallaslab._src.core.jax_adapter.mosaic_gpu.walker import Walker, handles


def _multicast(walker: Walker, axes: Any) -> int:
    if not axes:
        return 1
    names = (axes,) if isinstance(axes, str) else tuple(axes)
    return math.prod(walker.sizes.get(str(n), 1) for n in names)


def _predicated(walker: Walker, params: dict[str, Any], leaves: list[Any], mask: Any) -> Any:
    """(leaves without the predicate, the programs that copy, exact) of a predicated copy."""
    if not params.get("has_user_predicate"):
        return leaves, mask, True
    *leaves, predicate = leaves
    taken = values.as_mask(walker.read(predicate), walker.programs)
    if taken is None:
        walker.found.inexact(
            "A copy's predicate is only known at run time: it is counted as always taken."
        )
        return leaves, mask, False
    return leaves, mask & taken, True


@handles("copy_gmem_to_smem")
def _copy_in(walker: Walker, eqn: Any, mask: np.ndarray) -> None:
    """Operands: src, dst, [barrier], the transforms' leaves, [predicate].

    The barrier and the predicate are optional from jax 0.11 (`has_barrier`,
    `has_user_predicate`); before, the barrier is always there.
    """
    params = eqn.params
    src, dst, *leaves = eqn.invars
    if params.get("has_barrier", True):
        leaves = leaves[1:]
    leaves, mask, exact = _predicated(walker, params, leaves, mask)
    src_t, dst_t, _ = walker.memo(
        eqn,
        "transforms",
        lambda: refs.split_leaves(
            leaves,
            [
                params.get("src_transforms_treedef"),
                params.get("dst_transforms_treedef"),
                params.get("barrier_transforms_treedef"),
            ],
        ),
    )
    walker.copy_event(
        eqn,
        mask,
        "tma-load",
        gmem=(src, src_t),
        smem=(dst, dst_t),
        multicast=_multicast(walker, params.get("collective_axes")),
        exact=exact,
    )


@handles("copy_smem_to_gmem")
def _copy_out(walker: Walker, eqn: Any, mask: np.ndarray) -> None:
    params = eqn.params
    src, dst, *leaves = eqn.invars
    leaves, mask, exact = _predicated(walker, params, leaves, mask)
    src_t, dst_t = walker.memo(
        eqn,
        "transforms",
        lambda: refs.split_leaves(
            leaves, [params.get("src_transforms_treedef"), params.get("dst_transforms_treedef")]
        ),
    )
    walker.copy_event(eqn, mask, "tma-store", gmem=(dst, dst_t), smem=(src, src_t), exact=exact)


@handles("get", "load")  # `load`: Mosaic GPU's own (plgpu.load), from jax 0.11
def _get(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    ref, *leaves = eqn.invars
    (transforms,) = walker.memo(
        eqn, "transforms", lambda: refs.split_leaves(leaves, [eqn.params.get("tree")])
    )
    walker.copy_event(eqn, mask, "load", gmem=(ref, transforms))
    return [None]


@handles("swap", "addupdate", "store")
def _store(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    ref, _value, *leaves = eqn.invars
    (transforms,) = walker.memo(
        eqn, "transforms", lambda: refs.split_leaves(leaves, [eqn.params.get("tree")])
    )
    walker.copy_event(eqn, mask, "store", gmem=(ref, transforms))
    return [None] * len(eqn.outvars)


@handles(*PRODUCTS)
def _product(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    """One run of a product: counted, with its shape and layouts (read on its first run)."""
    found = walker.memo(eqn, "product", lambda: product(eqn))
    if found is None:
        walker.found.inexact(
            f"A {eqn.primitive.name}'s operand shapes could not be read: it is not counted."
        )
        return [None] * len(eqn.outvars)
    record = walker.mma(
        eqn,
        found.kind,
        (found.m, found.n, found.k),
        found.dtypes,
        lhs_memory=found.lhs_memory,
        lhs_t=found.lhs_transforms,
        rhs_t=found.rhs_transforms,
        collective=found.collective,
    )
    active = int(np.count_nonzero(mask))
    record.count += active
    walker.found.flops += found.flops * active
    return [None] * len(eqn.outvars)
