"""Translating index-map jaxprs into NumPy-evaluable `IndexMap`s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src import indexmap as ix
from pallaslab._src.core.jax_adapter.probes import jax_core


def index_map_from_jaxpr(
    closed: Any, num_grid: int, prefetch_names: Sequence[str] = ()
) -> ix.IndexMap:
    """Translates an index map's jaxpr into a NumPy-evaluable `IndexMap`."""
    debug = closed.jaxpr.debug_info
    jaxpr = closed.jaxpr
    names = list(getattr(debug, "arg_names", None) or ())
    if len(names) != len(jaxpr.invars):
        names = [*_grid_letters(num_grid), *prefetch_names]
        names += [f"s{k}" for k in range(len(names), len(jaxpr.invars))]
    names = [n or f"a{k}" for k, n in enumerate(names)]
    file = str(getattr(debug, "func_filename", "") or "")
    line = int(getattr(debug, "func_lineno", 0) or 0)
    env: dict[Any, ix.Expr] = {v: ix.arg(k, names[k]) for k, v in enumerate(jaxpr.invars)}
    try:
        for var, value in zip(jaxpr.constvars, closed.consts, strict=True):
            env[var] = ix.const(int(np.asarray(value)))
        outputs = tuple(_translate(jaxpr, env))
    except _UntranslatableError:
        return ix.IndexMap(tuple(names), num_grid, None, str(jaxpr), file, line)
    return ix.IndexMap(
        tuple(names), num_grid, outputs, ix.render_lambda(names, outputs), file, line
    )


class _UntranslatableError(Exception):
    pass


# Nested jits JAX emits for Python operators, rendered back as those operators.
_NAMED_JITS = {"floor_divide": "floordiv", "remainder": "mod"}


def _translate(jaxpr: Any, env: dict[Any, ix.Expr]) -> list[ix.Expr]:
    def read(atom: Any) -> ix.Expr:
        if isinstance(atom, jax_core.Literal):
            value = np.asarray(atom.val)
            if value.shape != () or value.dtype.kind not in "iub":
                raise _UntranslatableError
            return ix.const(int(value))
        return env[atom]

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        args = [read(a) for a in eqn.invars]
        if name in ("pjit", "jit", "closed_call", "core_call"):
            short = _NAMED_JITS.get(str(eqn.params.get("name", "")))
            if short and len(args) == 2:
                results = [ix.apply(short, *args)]
            else:
                sub = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
                sub_jaxpr = getattr(sub, "jaxpr", sub)
                inner = dict(zip(sub_jaxpr.invars, args, strict=True))
                for var, value in zip(sub_jaxpr.constvars, getattr(sub, "consts", []), strict=True):
                    inner[var] = ix.const(int(np.asarray(value)))
                results = _translate(sub_jaxpr, inner)
        elif name == "convert_element_type":
            results = [args[0]]
        elif name == "get":
            results = [_translate_load(eqn, args)]
        elif name == "integer_pow" and eqn.params.get("y") == 2:
            results = [ix.apply("mul", args[0], args[0])]
        elif name in ix.SUPPORTED_OPS:
            try:
                results = [ix.apply(name, *args)]
            except (TypeError, ValueError) as err:
                raise _UntranslatableError from err
        else:
            raise _UntranslatableError
        env.update(zip(eqn.outvars, results, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _translate_load(eqn: Any, args: list[ix.Expr]) -> ix.Expr:
    """`idx_ref[i]` on a scalar-prefetch ref: scalar reads with one index per dim."""
    ref, *indices = args
    ref_aval = eqn.invars[0].aval
    if ref.op != "arg" or eqn.outvars[0].aval.shape != () or len(indices) != len(ref_aval.shape):
        raise _UntranslatableError
    return ix.load(ref.value, ref.name, indices)


def _grid_letters(count: int) -> list[str]:
    letters = "ijklmn"
    return [letters[k] if k < len(letters) else f"g{k}" for k in range(count)]
