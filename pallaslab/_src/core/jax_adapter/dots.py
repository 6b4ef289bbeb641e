"""The matrix products of a kernel body, read from its jaxpr into `DotInfo` records.

For each `dot_general`: its M, N, K, the dtypes it sees and returns, whether an
operand was widened just before it (`x.astype(jnp.float32)` on bfloat16 data), and
whether its result is widened or summed right after (a k loop's accumulation).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.kernels import KernelSite, user_location
from pallaslab._src.core.jax_adapter.probes import jax_core
from pallaslab._src.records.hints import DotInfo

_CONVERT = "convert_element_type"
_ADDS = frozenset({"add", "add_any"})


def kernel_dots(site: KernelSite) -> tuple[DotInfo, ...]:
    """Every `dot_general` in a kernel's body (loops and branches included), in order."""
    found: list[DotInfo] = []
    for body in _bodies(site):
        _walk(body, found)
    return tuple(found)


def _bodies(site: KernelSite) -> Iterator[Any]:
    body = site.params.get("jaxpr")
    if body is not None:
        yield getattr(body, "jaxpr", body)
        return
    yield from jax_core.jaxprs_in_params(site.params)


def _walk(jaxpr: Any, found: list[DotInfo]) -> None:
    producers: dict[Any, Any] = {}
    consumers: dict[Any, list[Any]] = {}
    for eqn in jaxpr.eqns:
        for var in eqn.outvars:
            if _is_var(var):
                producers[var] = eqn
        for var in eqn.invars:
            if _is_var(var):
                consumers.setdefault(var, []).append(eqn)
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(_dot(eqn, producers, consumers))
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _walk(sub, found)


def _is_var(var: Any) -> bool:
    return isinstance(var, jax_core.Var) and not isinstance(var, jax_core.Literal)


def _dot(eqn: Any, producers: dict[Any, Any], consumers: dict[Any, list[Any]]) -> DotInfo:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
    out = eqn.outvars[0]
    lhs_free = [d for d in range(len(lhs.shape)) if d not in (*lhs_contract, *lhs_batch)]
    rhs_free = [d for d in range(len(rhs.shape)) if d not in (*rhs_contract, *rhs_batch)]
    widened_to, accumulated = _after(out, consumers)
    return DotInfo(
        m=math.prod(int(lhs.shape[d]) for d in lhs_free),
        n=math.prod(int(rhs.shape[d]) for d in rhs_free),
        k=math.prod(int(lhs.shape[d]) for d in lhs_contract),
        batch=math.prod(int(lhs.shape[d]) for d in lhs_batch),
        lhs_dtype=str(lhs.dtype),
        rhs_dtype=str(rhs.dtype),
        out_dtype=str(out.aval.dtype),
        lhs_from=_widened_from(eqn.invars[0], producers),
        rhs_from=_widened_from(eqn.invars[1], producers),
        accumulated=accumulated,
        widened_to=widened_to,
        location=user_location(eqn.source_info),
    )


def _widened_from(var: Any, producers: dict[Any, Any]) -> str:
    """The narrower float dtype `var` was converted from by the equation making it."""
    producer = producers.get(var) if _is_var(var) else None
    if producer is None or producer.primitive.name != _CONVERT:
        return ""
    source = producer.invars[0].aval.dtype
    target = var.aval.dtype
    if _is_float(source) and _is_float(target) and _bits(source) < _bits(target):
        return str(source)
    return ""


def _after(var: Any, consumers: dict[Any, list[Any]]) -> tuple[str, bool]:
    """(wider float dtype the result is converted to, whether it is then summed)."""
    widened = ""
    frontier = [var]
    accumulated = False
    for _ in range(3):  # a conversion or two between the dot and the add
        following = []
        for value in frontier:
            for eqn in consumers.get(value, ()):
                name = eqn.primitive.name
                if name in _ADDS:
                    accumulated = True
                elif name == _CONVERT:
                    out = eqn.outvars[0].aval.dtype
                    if _is_float(out) and _bits(out) > _bits(var.aval.dtype) and not widened:
                        widened = str(out)
                    following.append(eqn.outvars[0])
        frontier = following
    return widened, accumulated


def _is_float(dtype: Any) -> bool:
    return bool(np.issubdtype(np.dtype(dtype), np.floating)) or "float" in str(dtype)


def _bits(dtype: Any) -> int:
    return int(np.dtype(dtype).itemsize * 8)
