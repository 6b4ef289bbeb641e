"""Interpreting a kernel body for one program, recording every element it touches.

A small jaxpr interpreter: refs are NumPy buffers holding the program's blocks;
`get` / `swap` / `addupdate` and Triton's `masked_load` / `masked_swap` are done
here, lane by lane, after resolving their indexers (`pl.ds` offsets, strides,
integer and array indices, chained `.at[...]`) into the coordinates of each lane;
everything else is evaluated by binding the primitive on concrete values. Control
flow (`scan`, `while`, `cond`, `pjit`, `run_scoped`) is followed, so loops record
each iteration. Private shapes read here are pinned in tests/test_jax_adapter.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.body_eval import (
    CONTROL_FLOW,
    eqn_site,
    evaluate_eqns,
    uninitialized,
)
from pallaslab._src.core.jax_adapter.lanes import lane_indices
from pallaslab._src.core.jax_adapter.loop_budget import limits as loop_limits
from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    feature_notice,
    state_indexing,
    tree_util,
)
from pallaslab._src.core.jax_adapter.shapes import (
    call_body,
    closed_parts,
    inner_jaxpr,
    scan_counts,
    scoped_refs,
)
from pallaslab._src.geometry.accesses import AccessKind, ElementAccess

_NDIndexer: Any = getattr(state_indexing, "NDIndexer", None)
_Slice: Any = getattr(state_indexing, "Slice", None)

# Primitives that only carry hints for the compiler: their value is their input.
_IDENTITY = frozenset({"multiple_of", "max_contiguous", "optimization_barrier", "pvary"})
# Primitives with no effect on values the interpreter tracks.
_SKIPPED = frozenset({"debug_print", "debug_callback", "delay", "trace_start", "trace_stop"})
MAX_STEPS = 200_000


def available() -> str | None:
    """None when element-level recording works with this JAX, else a notice why not."""
    return feature_notice("element-accesses")


class UnsupportedError(Exception):
    """The body uses something the interpreter does not follow."""

    def __init__(self, what: str, file: str = "", line: int = 0) -> None:
        where = f" (line {line})" if line else ""
        super().__init__(f"{what}{where}")
        self.what, self.file, self.line = what, file, line


class StepLimitError(Exception):
    """The body ran more equations than the interpreter allows."""


@dataclasses.dataclass(eq=False)
class Buffer:
    """One ref during interpretation: which buffer, and its current contents."""

    index: int
    data: np.ndarray


@dataclasses.dataclass
class _View:
    """Lanes of a (possibly indexed) ref: per buffer dimension, each lane's coordinate.

    `steps[k][d]` is how far buffer coordinate d moves per step along view axis k,
    so indices past a view's end land where memory really is (`pl.ds` beyond the
    block); None for axes made by array indexing, which have no stride.
    """

    coords: tuple[np.ndarray, ...]
    steps: list[tuple[int, ...] | None]

    @classmethod
    def whole(cls, shape: tuple[int, ...]) -> _View:
        grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
        rank = len(shape)
        return cls(
            tuple(grids[d] for d in range(rank)),
            [tuple(1 if d == k else 0 for d in range(rank)) for k in range(rank)],
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.coords[0].shape) if self.coords else ()


def _apply_indexer(view: _View, indexer: Any, rank: int) -> _View:
    """The lanes of `view[indexer]`, NumPy-style (as `NDIndexer` defines them)."""
    shape = view.shape
    per_dim: list[tuple[np.ndarray, bool]] = []
    strides: list[int] = []
    for index in indexer.indices:
        if isinstance(index, _Slice):
            start, size, stride = int(index.start), int(index.size), int(index.stride)
            per_dim.append((start + stride * np.arange(size, dtype=np.int64), True))
            strides.append(stride)
        else:
            per_dim.append((np.asarray(index, dtype=np.int64), False))
            strides.append(0)
    int_shape = (
        tuple(int(n) for n in indexer.int_indexer_shape) if not all(s for _, s in per_dim) else ()
    )
    index_arrays, targets = lane_indices(per_dim, int_shape, np)
    out_rank = len(targets[0]) if targets else 0
    clipped = [np.clip(a, 0, n - 1) for a, n in zip(index_arrays, shape, strict=True)]
    coords = []
    for d in range(rank):
        base = view.coords[d][tuple(clipped)] if clipped else view.coords[d]
        # Indices past the view's edge continue along its stride.
        for k, (a, c) in enumerate(zip(index_arrays, clipped, strict=True)):
            step = view.steps[k]
            if step is not None and step[d]:
                base = base + (a - c) * step[d]
        coords.append(np.asarray(base, dtype=np.int64))
    steps: list[tuple[int, ...] | None] = [None] * out_rank
    for k, (_, sliced) in enumerate(per_dim):
        old = view.steps[k]
        if sliced and old is not None:
            steps[targets[k].index(-1)] = tuple(strides[k] * s for s in old)
    return _View(tuple(coords), steps)


def _lanes(buffer: Buffer, transforms: Sequence[Any], where: tuple[str, int]) -> _View:
    view = _View.whole(buffer.data.shape)
    for transform in transforms:
        if not isinstance(transform, _NDIndexer):
            raise UnsupportedError(f"ref transform {type(transform).__name__}", *where)
        view = _apply_indexer(view, transform, buffer.data.ndim)
    return view


class Interpreter:
    """Runs a kernel body on concrete blocks, calling `record` for every access.

    Args:
        program_ids: What `pl.program_id(axis)` returns, per (non-vmapped) axis.
        num_programs: What `pl.num_programs(axis)` returns.
        record: Receives each `ElementAccess`.
        fill: Value of lanes read from outside a buffer, per dtype kind.
    """

    def __init__(
        self,
        program_ids: Sequence[int],
        num_programs: Sequence[int],
        record: Callable[[ElementAccess], None],
    ) -> None:
        self.program_ids = [int(p) for p in program_ids]
        self.num_programs = [int(n) for n in num_programs]
        self.record = record
        self.steps = 0
        self.scoped: list[Buffer] = []
        self.first_scoped = 0

    # -- driving ---------------------------------------------------------------------

    def run(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        """Evaluates `jaxpr` (a Jaxpr) on concrete values and `Buffer`s."""
        return self._run_inputs(jaxpr, [*jaxpr.constvars, *jaxpr.invars], [*consts, *args])

    def _run_inputs(self, jaxpr: Any, inputs: Sequence[Any], values: Sequence[Any]) -> list[Any]:
        """Evaluates `jaxpr` with each of `inputs` (its variables) bound to a value."""

        def apply(eqn: Any, values: list[Any]) -> list[Any]:
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise StepLimitError
            return self._eqn(eqn, values)

        return evaluate_eqns(jaxpr, zip(inputs, values, strict=True), apply)

    def _eqn(self, eqn: Any, values: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        where = eqn_site(eqn)
        if name == "get":
            buffer, *flat = values
            return [self._load(eqn, buffer, self._transforms(eqn, "tree", flat), None, None)]
        if name in ("swap", "addupdate"):
            buffer, value, *flat = values
            transforms = self._transforms(eqn, "tree", flat)
            kind: AccessKind = "write" if name == "swap" else "update"
            old = self._store(eqn, buffer, transforms, value, None, kind=kind)
            return [old] if name == "swap" else []
        if name == "masked_load":
            buffer, transforms, mask, other = tree_util.tree_unflatten(
                eqn.params["args_tree"], values
            )
            return [self._load(eqn, buffer, transforms, mask, other)]
        if name == "masked_swap":
            buffer, transforms, value, mask = tree_util.tree_unflatten(
                eqn.params["args_tree"], values
            )
            return [self._store(eqn, buffer, transforms, value, mask, kind="write")]
        if name == "program_id":
            return [np.int32(self._axis(self.program_ids, eqn.params["axis"], where))]
        if name == "num_programs":
            return [np.int32(self._axis(self.num_programs, eqn.params["axis"], where))]
        if name in _IDENTITY:
            return list(values)
        if name in _SKIPPED:
            return [None] * len(eqn.outvars)
        if name in CONTROL_FLOW:
            return list(getattr(self, f"_{name}")(eqn, values))
        if name in CALL_PRIMITIVES:
            holds_buffer = any(isinstance(v, Buffer) for v in values)
            if not holds_buffer:
                try:
                    return self._bind(eqn, values)
                except Exception:  # e.g. program_id inside: follow it instead
                    pass
            sub = _sub_jaxpr(eqn)
            if sub is None:
                raise UnsupportedError(name, *where)
            jaxpr, consts = sub
            return self.run(jaxpr, consts, values)
        if any(isinstance(v, Buffer) for v in values):
            raise UnsupportedError(f"{name} on a ref", *where)
        try:
            return self._bind(eqn, values)
        except Exception as error:
            raise UnsupportedError(f"{name} ({type(error).__name__})", *where) from error

    @staticmethod
    def _bind(eqn: Any, values: list[Any]) -> list[Any]:
        outputs = eqn.primitive.bind(*values, **eqn.params)
        return list(outputs) if eqn.primitive.multiple_results else [outputs]

    @staticmethod
    def _axis(values: list[int], axis: int, where: tuple[str, int]) -> int:
        if not 0 <= axis < len(values):
            raise UnsupportedError(f"program_id({axis}) outside the grid", *where)
        return values[axis]

    @staticmethod
    def _transforms(eqn: Any, key: str, flat: list[Any]) -> tuple[Any, ...]:
        return tuple(tree_util.tree_unflatten(eqn.params[key], flat))

    # -- loads and stores ------------------------------------------------------------

    def _access(
        self,
        eqn: Any,
        kind: AccessKind,
        buffer: Buffer,
        view: _View,
        mask: Any,
    ) -> np.ndarray:
        shape = view.shape
        enabled = (
            np.ones(shape, dtype=bool)
            if mask is None
            else np.broadcast_to(np.asarray(mask, dtype=bool), shape)
        )
        file, line = eqn_site(eqn)
        self.record(
            ElementAccess(
                kind=kind,
                ref=buffer.index,
                primitive=eqn.primitive.name,
                coords=view.coords,
                mask=np.array(enabled),
                file=file,
                line=line,
                step=self.steps,
            )
        )
        return enabled

    def _load(self, eqn: Any, buffer: Any, transforms: Any, mask: Any, other: Any) -> Any:
        if not isinstance(buffer, Buffer):
            raise UnsupportedError("a load from something that is not a kernel ref", *eqn_site(eqn))
        view = _lanes(buffer, transforms or (), eqn_site(eqn))
        enabled = self._access(eqn, "read", buffer, view, mask)
        values, inside = _gather(buffer.data, view)
        values = np.where(inside, values, uninitialized(buffer.data.dtype))
        if other is not None:
            values = np.where(enabled, values, np.asarray(other, dtype=buffer.data.dtype))
        return values.astype(buffer.data.dtype)

    def _store(
        self, eqn: Any, buffer: Any, transforms: Any, value: Any, mask: Any, *, kind: AccessKind
    ) -> Any:
        if not isinstance(buffer, Buffer):
            raise UnsupportedError("a store to something that is not a kernel ref", *eqn_site(eqn))
        view = _lanes(buffer, transforms or (), eqn_site(eqn))
        enabled = self._access(eqn, kind, buffer, view, mask)
        old, inside = _gather(buffer.data, view)
        value = np.broadcast_to(np.asarray(value, dtype=buffer.data.dtype), view.shape)
        live = inside & enabled
        if view.coords:
            target = tuple(c[live] for c in view.coords)
            if kind == "update":
                np.add.at(buffer.data, target, value[live])
            else:
                buffer.data[target] = value[live]
        elif bool(live):
            buffer.data[()] = buffer.data[()] + value if kind == "update" else value
        return np.where(inside, old, uninitialized(buffer.data.dtype)).astype(buffer.data.dtype)

    # -- control flow ----------------------------------------------------------------

    def _scan(self, eqn: Any, values: list[Any]) -> list[Any]:
        params = eqn.params
        body, body_consts = closed_parts(params["jaxpr"])
        num_consts, num_carry = scan_counts(params)
        length = int(params["length"])
        consts = values[:num_consts]
        carry = values[num_consts : num_consts + num_carry]
        xs = values[num_consts + num_carry :]
        ys: list[list[Any]] = []
        order = range(length - 1, -1, -1) if params.get("reverse") else range(length)
        for t in order:
            outs = self.run(body, body_consts, [*consts, *carry, *(np.asarray(x)[t] for x in xs)])
            carry, y = outs[:num_carry], outs[num_carry:]
            ys.append(y)
        if params.get("reverse"):
            ys.reverse()
        stacked = [
            np.stack([np.asarray(step[k]) for step in ys]) if ys else np.zeros((0,))
            for k in range(len(eqn.outvars) - num_carry)
        ]
        return [*carry, *stacked]

    def _while(self, eqn: Any, values: list[Any]) -> list[Any]:
        params = eqn.params
        cond, cond_own = closed_parts(params["cond_jaxpr"])
        body, body_own = closed_parts(params["body_jaxpr"])
        n_cond, n_body = int(params["cond_nconsts"]), int(params["body_nconsts"])
        cond_consts, body_consts = values[:n_cond], values[n_cond : n_cond + n_body]
        carry = values[n_cond + n_body :]
        bound, _ = loop_limits()
        ran = 0
        while bool(np.asarray(self.run(cond, cond_own, [*cond_consts, *carry])[0])):
            if ran >= bound:  # the run budget's, as for emulated loops
                file, line = eqn_site(eqn)
                raise RuntimeError(
                    f"the loop at {file}:{line} ran {ran:,} iterations (the run budget) "
                    "while its accesses were followed"
                )
            carry = self.run(body, body_own, [*body_consts, *carry])
            ran += 1
        return carry

    def _cond(self, eqn: Any, values: list[Any]) -> list[Any]:
        branches = eqn.params["branches"]
        index = int(np.clip(int(np.asarray(values[0])), 0, len(branches) - 1))
        branch, consts = closed_parts(branches[index])
        return self.run(branch, consts, values[1:])

    def _run_scoped(self, eqn: Any, values: list[Any]) -> list[Any]:
        jaxpr = inner_jaxpr(eqn.params["jaxpr"])
        outer, allocated = scoped_refs(eqn)
        buffers = []
        for var in allocated:
            aval = getattr(var.aval, "inner_aval", var.aval)
            shape = tuple(getattr(aval, "shape", ()))
            try:
                dtype = np.dtype(getattr(aval, "dtype", np.float32))
            except TypeError:  # a semaphore: what uses it stops the interpretation
                dtype = np.dtype(np.int32)
            buffer = Buffer(
                self.first_scoped + len(self.scoped), np.full(shape, uninitialized(dtype), dtype)
            )
            self.scoped.append(buffer)
            buffers.append(buffer)
        # The closed-over refs take the equation's inputs, whatever this JAX calls them.
        return self._run_inputs(jaxpr, [*outer, *allocated], [*values, *buffers])


def _gather(data: np.ndarray, view: _View) -> tuple[np.ndarray, np.ndarray]:
    """Values at each lane (clipped into the buffer) and which lanes are inside it."""
    if not view.coords:
        return np.asarray(data[()]), np.ones((), dtype=bool)
    inside = np.ones(view.shape, dtype=bool)
    clipped = []
    for c, n in zip(view.coords, data.shape, strict=True):
        inside &= (c >= 0) & (c < n)
        clipped.append(np.clip(c, 0, max(n - 1, 0)))
    return data[tuple(clipped)], inside


def _sub_jaxpr(eqn: Any) -> tuple[Any, list[Any]] | None:
    sub = call_body(eqn.params)
    return None if sub is None else closed_parts(sub)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What interpreting one program gave.

    Attributes:
        accesses: Every load and store, in order.
        scoped: (shape, dtype name) of each buffer the body allocated itself.
        stopped: Why interpretation stopped early ("" when it ran to the end).
    """

    accesses: tuple[ElementAccess, ...]
    scoped: tuple[tuple[tuple[int, ...], str], ...]
    stopped: str = ""


def body_ref_shapes(site: Any) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each ref the kernel body takes, in argument order."""
    body = site.params["jaxpr"]
    found = []
    for var in body.invars:
        aval = getattr(var.aval, "inner_aval", var.aval)
        found.append((tuple(getattr(aval, "shape", ())), str(getattr(aval, "dtype", ""))))
    return found


def interpret_program(
    site: Any,
    program_ids: Sequence[int],
    num_programs: Sequence[int],
    buffers: Sequence[np.ndarray],
) -> Recorded:
    """Runs a `pallas_call`'s body for one program on `buffers`, one per body ref.

    Args:
        site: The kernel site (a `pallas_call`).
        program_ids: `pl.program_id(axis)` per axis the body sees (vmapped axes
            excluded).
        num_programs: `pl.num_programs(axis)` likewise.
        buffers: The blocks the body's refs start with (copied; not changed).
    """
    if (why := available()) is not None:
        raise UnsupportedError(why)
    body = site.params["jaxpr"]
    found: list[ElementAccess] = []
    interpreter = Interpreter(program_ids, num_programs, found.append)
    interpreter.first_scoped = len(buffers)
    refs = [Buffer(k, np.array(b, copy=True)) for k, b in enumerate(buffers)]
    stopped = ""
    try:
        if body.constvars:
            raise UnsupportedError("a kernel body with constants")
        interpreter.run(body, [], refs)
    except UnsupportedError as error:
        stopped = f"stopped at {error}: not followed yet"
    except StepLimitError:
        stopped = f"stopped after {MAX_STEPS} steps"
    return Recorded(
        tuple(found),
        tuple((tuple(b.data.shape), str(b.data.dtype)) for b in interpreter.scoped),
        stopped,
    )
