"""Counting the arithmetic in a kernel body's jaxpr."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

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
    flops, transcendentals, exact = _count(inner_jaxpr(jaxpr))
    return KernelWork(flops * programs, transcendentals * programs, exact)


def _count(jaxpr: Any) -> tuple[int, int, bool]:
    flops = transcendentals = 0
    exact = True
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        out = eqn.outvars[0].aval if eqn.outvars else None
        if name == "dot_general":
            # ((lhs contracting, rhs contracting), (lhs batch, rhs batch))
            (lhs_contracting, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            depth = math.prod(lhs_shape[d] for d in lhs_contracting)
            flops += 2 * _size(out) * depth
        elif name in _TRANSCENDENTAL:
            transcendentals += _size(out)
        elif name in _ELEMENTWISE and _is_floating(out):
            flops += _size(out)
        elif name in _REDUCTIONS:
            flops += _size(eqn.invars[0].aval)
        elif name == "scan":
            inner = _count(inner_jaxpr(eqn.params["jaxpr"]))
            length = int(eqn.params["length"])
            flops, transcendentals = flops + length * inner[0], transcendentals + length * inner[1]
            exact = exact and inner[2]
        elif name == "cond":
            branches = [_count(inner_jaxpr(b)) for b in eqn.params["branches"]]
            costliest = max(branches)
            flops, transcendentals = flops + costliest[0], transcendentals + costliest[1]
            exact = exact and len(set(branches)) == 1
        elif name in ("while", "run_scoped") or name in CALL_PRIMITIVES:
            for sub in jax_core.jaxprs_in_params(eqn.params):
                inner = _count(sub)
                flops, transcendentals = flops + inner[0], transcendentals + inner[1]
                exact = exact and inner[2]
            # A while loop's trip count is not known while tracing: counted once.
            exact = exact and name != "while"
    return flops, transcendentals, exact
