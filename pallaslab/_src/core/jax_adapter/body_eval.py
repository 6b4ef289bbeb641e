"""What pallaslab's kernel-body evaluators share, read from JAX one way.

Three evaluators walk a kernel body's equations: the emulator's discharged body
(`emulation`), the instrumented body (`instrument`) and the interpreter of element
accesses (`accesses`). They share the private modules they read, the walk itself (an
environment of values, one step per equation), binding a primitive as JAX binds it,
an equation's line in the user's source, and a dtype's physical stand-in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter.kernels import user_location
from pallaslab._src.core.jax_adapter.probes import jax_core

__all__ = [
    "CONTROL_FLOW",
    "bind",
    "eqn_site",
    "evaluate_eqns",
    "hlo_interpreter",
    "inner_aval",
    "missing",
    "pallas_core",
    "physical_dtype",
    "state_discharge",
    "state_types",
    "uninitialized",
]

try:
    from jax._src.pallas import core as pallas_core
    from jax._src.pallas import hlo_interpreter
    from jax._src.state import discharge as state_discharge
    from jax._src.state import types as state_types
except ImportError:  # pragma: no cover - the evaluators are then unavailable
    pallas_core = None  # type: ignore[assignment]
    hlo_interpreter = None  # type: ignore[assignment]
    state_discharge = None  # type: ignore[assignment]
    state_types = None  # type: ignore[assignment]

# Control flow each evaluator follows itself, in a method named `_<primitive>`.
CONTROL_FLOW = frozenset({"scan", "while", "cond", "run_scoped"})


def missing(needed: Iterable[tuple[Any, str]]) -> str:
    """The first of the (module, attribute) pairs this JAX lacks ("" when none)."""
    for module, name in needed:
        if module is None or not hasattr(module, name):
            return f"{getattr(module, '__name__', module)}.{name} not found"
    return ""


def evaluate_eqns(
    jaxpr: Any,
    bindings: Iterable[tuple[Any, Any]],
    apply: Callable[[Any, list[Any]], Sequence[Any]],
) -> list[Any]:
    """Evaluates `jaxpr`, its variables bound as `bindings` says.

    `apply(eqn, values)` gives each equation's outputs from its inputs' values;
    returns the values of the jaxpr's outputs.
    """
    env: dict[Any, Any] = dict(bindings)

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jax_core.Literal) else env[atom]

    for eqn in jaxpr.eqns:
        outputs = apply(eqn, [read(v) for v in eqn.invars])
        env.update(
            (var, value)
            for var, value in zip(eqn.outvars, outputs, strict=True)
            if not isinstance(var, jax_core.DropVar)
        )
    return [read(v) for v in jaxpr.outvars]


def bind(eqn: Any, values: Sequence[Any]) -> list[Any]:
    """Binds the equation's primitive on `values` with its parameters, as JAX does."""
    params = eqn.primitive.get_bind_params(eqn.params)
    subfuns: Sequence[Any] = ()
    if isinstance(params, tuple):  # older JAX: (subfuns, params)
        subfuns, params = params
    result = eqn.primitive.bind(*subfuns, *values, **params)
    return list(result) if eqn.primitive.multiple_results else [result]


def eqn_site(eqn: Any) -> tuple[str, int]:
    """(file, line) of the user's source an equation comes from (("", 0) if unknown)."""
    location = user_location(eqn.source_info)
    return (location.file, location.line) if location is not None else ("", 0)


def inner_aval(aval: Any) -> Any:
    """The value's aval inside a ref's (the aval itself when it is no ref)."""
    return getattr(aval, "inner_aval", aval)


def physical_dtype(dtype: Any) -> Any:
    """The dtype interpret mode holds a value in (semaphores have a stand-in)."""
    rules = getattr(dtype, "_rules", None)
    if rules is not None and hasattr(rules, "pallas_interpret_element_aval"):
        return rules.pallas_interpret_element_aval(dtype).dtype
    return dtype


def uninitialized(dtype: Any) -> Any:
    """What a lane of uninitialized memory, or outside a buffer, reads in the evaluators.

    NaN for floats (as Pallas' interpreter), False for booleans, the smallest integer
    for integers, else 0.
    """
    dtype = np.dtype(dtype)
    # ml_dtypes' types (bfloat16, float8, int4 ...) have NumPy kind "V": ask jnp.
    if jnp.issubdtype(dtype, jnp.inexact):
        return np.asarray(np.nan).astype(dtype)
    if dtype == np.bool_:
        return False
    if jnp.issubdtype(dtype, jnp.integer):
        return jnp.iinfo(dtype).min
    return 0
