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
    src_t, dst_t, _ = refs.split_leaves(
        leaves,
        [
            params.get("src_transforms_treedef"),
            params.get("dst_transforms_treedef"),
            params.get("barrier_transforms_treedef"),
        ],
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
    src_t, dst_t = refs.split_leaves(
        leaves, [params.get("src_transforms_treedef"), params.get("dst_transforms_treedef")]
    )
    walker.copy_event(eqn, mask, "tma-store", gmem=(dst, dst_t), smem=(src, src_t), exact=exact)


@handles("get", "load")  # `load`: Mosaic GPU's own (plgpu.load), from jax 0.11
def _get(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    ref, *leaves = eqn.invars
    (transforms,) = refs.split_leaves(leaves, [eqn.params.get("tree")])
    walker.copy_event(eqn, mask, "load", gmem=(ref, transforms))
    return [None]


@handles("swap", "addupdate", "store")
def _store(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    ref, _value, *leaves = eqn.invars
    (transforms,) = refs.split_leaves(leaves, [eqn.params.get("tree")])
    walker.copy_event(eqn, mask, "store", gmem=(ref, transforms))
    return [None] * len(eqn.outvars)


def _operand(walker: Walker, var: Any, transforms: tuple[Any, ...]) -> tuple[Any, str, Any]:
    """(logical shape, memory, the aval) of one matrix operand, a ref or a value."""
    aval = var.aval if hasattr(var, "aval") else None
    if hasattr(aval, "memory_space") or hasattr(aval, "inner_aval"):
        buffer = walker.buffer_of(walker.read(var))
        space = buffer.space if buffer is not None else refs.memory_space(aval)
        return refs.logical_shape(aval, transforms), space, aval
    return tuple(getattr(aval, "shape", ())), "registers", aval


@handles("wgmma_ref", "wgmma")
def _wgmma(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any] | None:
    params = eqn.params
    acc, lhs, rhs, *leaves = eqn.invars
    acc_t, lhs_t, rhs_t = refs.split_leaves(
        leaves,
        [
            params.get("acc_transforms_tree"),
            params.get("a_transforms_tree"),
            params.get("b_transforms_tree"),
        ],
    )
    acc_shape, _, acc_aval = _operand(walker, acc, acc_t)
    lhs_shape, lhs_space, lhs_aval = _operand(walker, lhs, lhs_t)
    rhs_shape, _, rhs_aval = _operand(walker, rhs, rhs_t)
    _product(
        walker,
        eqn,
        mask,
        "wgmma",
        acc_shape=acc_shape,
        lhs_shape=lhs_shape,
        rhs_shape=rhs_shape,
        dtypes=(refs.dtype_name(lhs_aval), refs.dtype_name(rhs_aval), refs.dtype_name(acc_aval)),
        lhs_space=lhs_space,
        lhs_t=lhs_t,
        rhs_t=rhs_t,
    )
    return [None] * len(eqn.outvars) if eqn.outvars else None


@handles("mma")
def _register_mma(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    """`mma` (jax 0.11+): a product of values in registers, acc += a @ b."""
    acc, lhs, rhs = (v.aval for v in eqn.invars[:3])
    _product(
        walker,
        eqn,
        mask,
        "dot",
        acc_shape=tuple(acc.shape),
        lhs_shape=tuple(lhs.shape),
        rhs_shape=tuple(rhs.shape),
        dtypes=(refs.dtype_name(lhs), refs.dtype_name(rhs), refs.dtype_name(acc)),
        lhs_space="registers",
        lhs_t=(),
        rhs_t=(),
    )
    return [None] * len(eqn.outvars)


@handles("tcgen05_mma")
def _tcgen05(walker: Walker, eqn: Any, mask: np.ndarray) -> None:
    params = eqn.params
    acc, lhs, rhs = eqn.invars[:3]
    leading = 4 + bool(params.get("arrive")) + 2 * bool(params.get("scaled"))
    leading += bool(params.get("sparse"))
    names = [
        "acc_transforms_tree",
        "a_transforms_tree",
        "b_transforms_tree",
        "barrier_transforms_tree",
        "a_scale_transforms_tree",
        "b_scale_transforms_tree",
        "a_sparse_metadata_transforms_tree",
    ]
    acc_t, lhs_t, rhs_t, *_ = refs.split_leaves(
        eqn.invars[leading:], [params.get(n) for n in names]
    )
    acc_shape, _, acc_aval = _operand(walker, acc, acc_t)
    lhs_shape, lhs_space, lhs_aval = _operand(walker, lhs, lhs_t)
    rhs_shape, _, rhs_aval = _operand(walker, rhs, rhs_t)
    _product(
        walker,
        eqn,
        mask,
        "tcgen05",
        acc_shape=acc_shape,
        lhs_shape=lhs_shape,
        rhs_shape=rhs_shape,
        dtypes=(refs.dtype_name(lhs_aval), refs.dtype_name(rhs_aval), refs.dtype_name(acc_aval)),
        lhs_space=lhs_space,
        lhs_t=lhs_t,
        rhs_t=rhs_t,
        collective=str(params.get("collective_axis") or ""),
    )


def _product(
    walker: Walker,
    eqn: Any,
    mask: np.ndarray,
    kind: str,
    *,
    acc_shape: Any,
    lhs_shape: Any,
    rhs_shape: Any,
    dtypes: tuple[str, str, str],
    lhs_space: str,
    lhs_t: tuple[Any, ...],
    rhs_t: tuple[Any, ...],
    collective: str = "",
) -> None:
    """Counts one run of a product: (m, n) from the accumulator, k from the right operand."""
    if not acc_shape or len(acc_shape) < 2 or not rhs_shape or len(rhs_shape) < 2:
        walker.found.inexact(f"A {kind}'s operand shapes could not be read: it is not counted.")
        return
    m, n = int(acc_shape[-2]), int(acc_shape[-1])
    k = int(rhs_shape[-2])
    record = walker.mma(
        eqn,
        kind,
        (m, n, k),
        dtypes,
        lhs_memory=lhs_space,
        lhs_t=lhs_t,
        rhs_t=rhs_t,
        collective=collective,
    )
    active = int(np.count_nonzero(mask))
    record.count += active
    walker.found.flops += 2 * m * n * k * active
    del lhs_shape
