"""Counting the arithmetic in a kernel body's jaxpr."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from pallaslab._src.core.jax_adapter.mosaic_gpu.products import PRODUCTS, product
from pallaslab._src.core.jax_adapter.probes import CALL_PRIMITIVES, jax_core
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr
from pallaslab._src.records import KernelWork

_TRANSCENDENTAL = frozenset(
    {
        "exp",
        "exp2",
        "log",
        "log1p",
        "expm1",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "tan",
        "atan2",
        "sqrt",
        "rsqrt",
        "cbrt",
        "pow",
        "erf",
        "erfc",
        "erf_inv",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "lgamma",
        "digamma",
    }
)
_ELEMENTWISE = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "max",
        "min",
        "neg",
        "abs",
        "sign",
        "floor",
        "ceil",
        "round",
        "select_n",
        "clamp",
        "integer_pow",
        "square",
        "reciprocal",
        "nextafter",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and",
        "or",
        "xor",
        "not",
        "add_any",
    }
)
_REDUCTIONS = frozenset(
    {
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
        "reduce_and",
        "reduce_or",
        "argmax",
        "argmin",
        "cumsum",
        "cummax",
        "cumprod",
    }
)


def _size(aval: Any) -> int:
    return math.prod(getattr(aval, "shape", ()) or ())


def _is_floating(aval: Any) -> bool:
    # Index arithmetic on integers is not what a roofline counts.
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and bool(jnp.issubdtype(dtype, jnp.inexact))


def count_work(jaxpr: Any, programs: int) -> KernelWork:
    """The work of one program of a kernel body, times the number of programs."""
    count = _Count()
    count.add(inner_jaxpr(jaxpr))
    return KernelWork(
        count.flops * programs,
        count.transcendentals * programs,
        count.exact,
        matmul_flops=count.matmul_flops * programs,
        matmul_dtypes=tuple(sorted(count.matmul_dtypes)),
    )


class _Count:
    """Running totals over a body, nested bodies scaled by their trip counts."""

    def __init__(self) -> None:
        self.flops = self.transcendentals = self.matmul_flops = 0
        self.exact = True
        self.matmul_dtypes: set[str] = set()

    def add(self, jaxpr: Any, times: int = 1) -> None:
        for eqn in jaxpr.eqns:
            self._add_eqn(eqn, times)

    def _add_eqn(self, eqn: Any, times: int) -> None:
        name = eqn.primitive.name
        out = eqn.outvars[0].aval if eqn.outvars else None
        if name == "dot_general":
            # ((lhs contracting, rhs contracting), (lhs batch, rhs batch))
            (lhs_contracting, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            depth = math.prod(lhs_shape[d] for d in lhs_contracting)
            flops = 2 * _size(out) * depth * times
            self.flops += flops
            self.matmul_flops += flops
            dtypes = [jnp.dtype(v.aval.dtype) for v in eqn.invars[:2]]
            self.matmul_dtypes.add(str(max(dtypes, key=lambda d: d.itemsize)))
        elif name in PRODUCTS:  # Mosaic GPU's tensor-core products (wgmma, tcgen05_mma)
            found = product(eqn)
            if found is not None:
                flops = found.flops * times
                self.flops += flops
                self.matmul_flops += flops
                self.matmul_dtypes.add(found.dtypes[1])
        elif name in _TRANSCENDENTAL:
            self.transcendentals += _size(out) * times
        elif name in _ELEMENTWISE and _is_floating(out):
            self.flops += _size(out) * times
        elif name in _REDUCTIONS:
            self.flops += _size(eqn.invars[0].aval) * times
        elif name == "scan":
            self.add(inner_jaxpr(eqn.params["jaxpr"]), times * int(eqn.params["length"]))
        elif name == "cond":
            branches = []
            for branch in eqn.params["branches"]:
                inner = _Count()
                inner.add(inner_jaxpr(branch))
                branches.append(inner)
            costliest = max(branches, key=lambda c: (c.flops, c.transcendentals))
            self.flops += costliest.flops * times
            self.transcendentals += costliest.transcendentals * times
            self.matmul_flops += costliest.matmul_flops * times
            # Any branch's products are products the kernel may run.
            self.matmul_dtypes.update(*(b.matmul_dtypes for b in branches))
            totals = {(b.flops, b.transcendentals) for b in branches}
            self.exact = self.exact and all(b.exact for b in branches) and len(totals) == 1
        elif name in ("while", "run_scoped") or name in CALL_PRIMITIVES:
            for sub in jax_core.jaxprs_in_params(eqn.params):
                self.add(sub, times)
            # A while loop's trip count is not known while tracing: counted once.
            self.exact = self.exact and name != "while"
