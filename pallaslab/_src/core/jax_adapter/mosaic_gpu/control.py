"""Control flow and mesh queries for the walker: loops, branches, scopes, axis indices."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.mosaic_gpu import values
from pallaslab._src.core.jax_adapter.mosaic_gpu.walker import (
    HELPERS_FILE,
    MAX_WHILE_STEPS,
    SHORTCUT_LENGTH,
    Walker,
    _frames,
    handles,
    scoped_inputs,
)
from pallaslab._src.core.jax_adapter.probes import jax_core
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr


@handles("scan")
def _scan(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    params = eqn.params
    body = params["jaxpr"]
    length = int(params["length"])
    num_consts, num_carry = int(params["num_consts"]), int(params["num_carry"])
    inputs = [walker.read(v) for v in eqn.invars]
    consts = inputs[:num_consts]
    carry = inputs[num_consts : num_consts + num_carry]
    num_xs = len(inputs) - num_consts - num_carry
    num_ys = len(eqn.outvars) - num_carry
    if length > SHORTCUT_LENGTH and walker.pure(body):
        # Nothing inside but arithmetic: one step's work, times the length.
        before = (walker.found.flops, walker.found.transcendentals)
        walker.run(body, [*consts, *carry, *([None] * num_xs)], mask)
        walker.found.flops += (walker.found.flops - before[0]) * (length - 1)
        walker.found.transcendentals += (walker.found.transcendentals - before[1]) * (length - 1)
        return [None] * len(eqn.outvars)
    for _ in range(length):
        outs = walker.run(body, [*consts, *carry, *([None] * num_xs)], mask)
        carry = outs[:num_carry]
    return [*carry, *([None] * num_ys)]


def _keep(active: np.ndarray, new: Any, old: Any) -> Any:
    """A loop carry after a step taken only by `active` programs."""
    if isinstance(new, np.ndarray) and isinstance(old, np.ndarray):
        return np.where(active, new, old)
    return new if new is old else (new if not isinstance(new, np.ndarray) else None)


@handles("while")
def _while(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    params = eqn.params
    cond_n, body_n = int(params["cond_nconsts"]), int(params["body_nconsts"])
    inputs = [walker.read(v) for v in eqn.invars]
    cond_consts = inputs[:cond_n]
    body_consts = inputs[cond_n : cond_n + body_n]
    carry = inputs[cond_n + body_n :]
    active = mask.copy()
    trips = np.zeros(walker.programs, np.int64)
    for _ in range(MAX_WHILE_STEPS):
        (going,) = walker.run(params["cond_jaxpr"], [*cond_consts, *carry], active)
        going_mask = values.as_mask(going, walker.programs)
        if going_mask is None:
            walker.found.inexact(
                "A loop runs until a value only known at run time: its body is counted once."
            )
            walker.run(params["body_jaxpr"], [*body_consts, *carry], active)
            return [None] * len(carry)
        active = active & going_mask
        if not active.any():
            break
        outs = walker.run(params["body_jaxpr"], [*body_consts, *carry], active)
        carry = [_keep(active, new, old) for new, old in zip(outs, carry, strict=True)]
        trips += active
    else:
        walker.found.inexact(f"A loop ran past {MAX_WHILE_STEPS:,} steps; the counts stop there.")
    _note_loop(walker, eqn, trips, mask)
    return carry


def _note_loop(walker: Walker, eqn: Any, trips: np.ndarray, mask: np.ndarray) -> None:
    """Keeps a loop whose trip count differs between programs (a persistent schedule)."""
    ran = trips[mask]
    if not ran.size:
        return
    strided = any(
        HELPERS_FILE in f.file_name.replace("\\", "/") and "nd_loop" in f.function_name
        for f in _frames(eqn)
    )
    if strided or int(ran.min()) != int(ran.max()):
        walker.found.loops.append((walker.where, trips.copy(), strided))


@handles("cond")
def _cond(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    branches = eqn.params["branches"]
    index, *operands = [walker.read(v) for v in eqn.invars]
    if index is None:
        walker.found.inexact(
            "A branch depends on a value only known at run time: every branch is counted."
        )
        for branch in branches:
            walker.run(branch, operands, mask)
        return [None] * len(eqn.outvars)
    which = np.broadcast_to(index.astype(np.int64), (walker.programs,))
    which = np.clip(which, 0, len(branches) - 1)
    results: list[list[tuple[np.ndarray, Any]]] = [[] for _ in eqn.outvars]
    for k, branch in enumerate(branches):
        taken = mask & (which == k)
        if not taken.any():
            continue
        outs = walker.run(branch, operands, taken)
        for slot, out in zip(results, outs, strict=True):
            slot.append((taken, out))
    return [_merged(mask, slot) for slot in results]


def _merged(mask: np.ndarray, taken: list[tuple[np.ndarray, Any]]) -> Any:
    if len(taken) == 1 and not isinstance(taken[0][1], np.ndarray):
        return taken[0][1]
    if any(not isinstance(v, np.ndarray) for _, v in taken):
        return None
    return values.combine(mask, taken)


@handles("run_scoped")
def _run_scoped(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    return walker.run(eqn.params["jaxpr"], scoped_inputs(walker, eqn), mask, open_jaxpr=True)


def _axis_names(axis_name: Any) -> tuple[str, ...]:
    if isinstance(axis_name, (tuple, list)):
        return tuple(str(a) for a in axis_name)
    return (str(axis_name),)


@handles("axis_index")
def _axis_index(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    del mask
    names = _axis_names(eqn.params["axis_name"])
    if any(n not in walker.axes for n in names):
        return [None]
    index = np.zeros(walker.programs, np.int64)
    for name in names:  # row-major over the named axes
        index = index * walker.sizes[name] + walker.axes[name]
    return [index]


@handles("psum")
def _psum(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    """`lax.axis_size` is `psum(1, axis)`: the size of the named axes."""
    del mask
    names = _axis_names(eqn.params.get("axes", eqn.params.get("axis_name", ())))
    inputs = [walker.read(v) for v in eqn.invars]
    if any(n not in walker.sizes for n in names) or any(v is None for v in inputs):
        return [None] * len(eqn.outvars)
    size = int(np.prod([walker.sizes[n] for n in names]))
    return [v * size for v in inputs]


@handles("program_id")
def _program_id(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    del mask
    return [walker.axes.get(f"#{int(eqn.params['axis'])}")]


@handles("num_programs")
def _num_programs(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    del mask
    size = walker.sizes.get(f"#{int(eqn.params['axis'])}")
    return [None if size is None else np.asarray(size, np.int64)]


@handles("core_map")
def _core_map(walker: Walker, eqn: Any, mask: np.ndarray) -> list[Any]:
    """A mesh inside the kernel (warps of a warpgroup): its body once per mesh index."""
    mesh = eqn.params["mesh"]
    shape = dict(getattr(mesh, "shape", {}) or {})
    body = eqn.params["jaxpr"]
    inputs = [walker.read(v) for v in eqn.invars]
    saved_axes, saved_sizes = dict(walker.axes), dict(walker.sizes)
    try:
        names = [str(n) for n in shape]
        for index in itertools.product(*(range(int(shape[n])) for n in shape)):
            for name, at in zip(names, index, strict=True):
                walker.axes[name] = np.full(walker.programs, at, np.int64)
                walker.sizes[name] = int(shape[name])
            jaxpr = inner_jaxpr(body)
            walker.run(body, [*inputs, *([None] * (len(jaxpr.invars)))], mask, open_jaxpr=True)
    finally:
        walker.axes, walker.sizes = saved_axes, saved_sizes
    return [None] * len(eqn.outvars)


__all__ = ["jax_core"]
