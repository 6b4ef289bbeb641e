"""Translating index-map jaxprs into NumPy-evaluable `IndexMap`s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import sources
from pallaslab._src.core.jax_adapter.probes import CALL_PRIMITIVES, jax_core
from pallaslab._src.core.jax_adapter.shapes import call_body, closed_parts
from pallaslab._src.records import indexmap as ix


def index_map_from_jaxpr(
    closed: Any, num_grid: int, prefetch_names: Sequence[str] = (), out_tree: Any = None
) -> ix.IndexMap:
    """Translates an index map's jaxpr into a NumPy-evaluable `IndexMap`.

    Args:
        closed: The index map's closed jaxpr.
        num_grid: How many of its arguments are grid indices.
        prefetch_names: Names of the scalar-prefetch arguments that follow them.
        out_tree: The pytree of its results (`BlockMapping.index_map_out_tree`),
            where a `pl.BoundedSlice` dimension returns a `pl.ds(start, size)`
            whose start and size may each be static or traced.
    """
    jaxpr, consts = closed_parts(closed)
    debug = jaxpr.debug_info
    names = list(getattr(debug, "arg_names", None) or ())
    if len(names) != len(jaxpr.invars):
        names = [*_grid_letters(num_grid), *prefetch_names]
        names += [f"s{k}" for k in range(len(names), len(jaxpr.invars))]
    names = [n or f"a{k}" for k, n in enumerate(names)]
    file = str(getattr(debug, "func_filename", "") or "")
    line = int(getattr(debug, "func_lineno", 0) or 0)
    # JAX's own index map (a BlockSpec without one, or none at all) lives in JAX's
    # core.py: no one's source. Records say "default" instead of pointing there.
    made_by_jax = sources.is_internal_file(file)
    if made_by_jax:
        file, line = "", 0
    env: dict[Any, ix.Expr] = {v: ix.arg(k, names[k]) for k, v in enumerate(jaxpr.invars)}
    try:
        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = ix.const(int(np.asarray(value)))
        flat = _translate(jaxpr, env)
        outputs, sizes = _split_slices(flat, out_tree)
    except _UntranslatableError:
        return ix.IndexMap(tuple(names), num_grid, None, str(jaxpr), file, line)
    return ix.IndexMap(
        tuple(names),
        num_grid,
        outputs,
        ix.render_lambda(names, outputs, sizes),
        file,
        line,
        sizes=sizes if any(s is not None for s in sizes) else (),
        default=made_by_jax and all(o.op == "const" and o.value == 0 for o in outputs),
    )


def _split_slices(
    flat: list[ix.Expr], out_tree: Any
) -> tuple[tuple[ix.Expr, ...], tuple[ix.Expr | None, ...]]:
    """Per block dimension: its start (or block index) and, for slices, the size.

    The index map's jaxpr returns the traced leaves only; a `pl.ds` node keeps its
    static start or size in the tree's node data `(start, size, stride)`.
    """
    plain = out_tree is None or out_tree.node_data() is None  # no tree, or one bare leaf
    if plain or out_tree.num_leaves == out_tree.num_nodes - 1 == len(flat):
        return tuple(flat), (None,) * len(flat)
    leaves = iter(flat)
    starts: list[ix.Expr] = []
    sizes: list[ix.Expr | None] = []
    for child in out_tree.children():
        data = child.node_data()
        if data is None:  # a leaf: one block index
            starts.append(next(leaves))
            sizes.append(None)
            continue
        if getattr(data[0], "__name__", "") != "Slice":
            raise _UntranslatableError
        start, size, stride = data[1]
        if stride not in (None, 1):
            raise _UntranslatableError
        starts.append(next(leaves) if start is None else ix.const(int(start)))
        sizes.append(next(leaves) if size is None else ix.const(int(size)))
    if next(leaves, None) is not None:
        raise _UntranslatableError
    return tuple(starts), tuple(sizes)


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
        if name in CALL_PRIMITIVES:
            short = _NAMED_JITS.get(str(eqn.params.get("name", "")))
            sub = call_body(eqn.params)
            if short and len(args) == 2:
                results = [ix.apply(short, *args)]
            elif sub is None:
                raise _UntranslatableError
            else:
                sub_jaxpr, sub_consts = closed_parts(sub)
                inner = dict(zip(sub_jaxpr.invars, args, strict=True))
                for var, value in zip(sub_jaxpr.constvars, sub_consts, strict=True):
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
