"""The evaluator: runs a stateful kernel jaxpr on JAX values, recording what `Probe` asks.

Each load and store is done with Pallas' own discharge rule for it; beside it, what
the access touched is recorded in the evaluator's state. Loops, branches, calls and
scoped buffers are followed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from pallaslab._src.core.jax_adapter.body_eval import (
    CONTROL_FLOW,
    bind,
    eqn_site,
    evaluate_eqns,
    inner_aval,
    physical_dtype,
    state_discharge,
    state_types,
    uninitialized,
)
from pallaslab._src.core.jax_adapter.host_prints import HOST_PRINTS
from pallaslab._src.core.jax_adapter.instrument.coordinates import (
    effective,
    lane_coordinates,
    window_of,
)
from pallaslab._src.core.jax_adapter.instrument.records import (
    BIG,
    AccessSite,
    Probe,
    UnsupportedError,
)
from pallaslab._src.core.jax_adapter.instrument.sites import uses_grid
from pallaslab._src.core.jax_adapter.loop_budget import bounded_while_loop
from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    jax_core,
    source_info_util,
    tree_util,
)
from pallaslab._src.core.jax_adapter.shapes import scan_counts

_RULES: Any = getattr(state_discharge, "_discharge_rules", None)
# Newer JAX passes discharge rules one context object instead of the avals.
_CONTEXT: Any = getattr(state_discharge, "DischargeContext", None)
_AbstractRef: Any = getattr(state_types, "AbstractRef", None)


@dataclasses.dataclass(frozen=True, eq=False)
class Handle:
    """A ref during evaluation: its key in the state and its shape."""

    key: str
    shape: tuple[int, ...]


@dataclasses.dataclass(kw_only=True, eq=False)
class Evaluator:
    """Evaluates a stateful kernel jaxpr on JAX values, refs held in `state`.

    Attributes:
        env: The grid environment (`GridAxis` per axis) program ids are read from.
        by_eqn: The access site of each load or store equation (by `id`).
        program: The program's linear index (int32), for element records.
        probe: What to record.
        fills: Per masked-load site in `probe.fills`, its (switch, value).
        blocks: Ref key -> block index, for the body's blocked operands.
        rank: The largest rank of a ref.
        count: How many access sites the body has.
        state: Refs' values and the records, by key.
        next_scoped: The number of the next scoped buffer.
    """

    env: Any
    by_eqn: dict[int, AccessSite]
    program: Any
    probe: Probe
    fills: dict[int, Any]
    blocks: dict[str, int]
    rank: int
    count: int
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    next_scoped: int = 0

    def evaluate(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        """Evaluates `jaxpr` on `consts` and `args` (arrays, and `Handle`s for refs)."""

        def apply(eqn: Any, values: list[Any]) -> list[Any]:
            traceback = getattr(eqn.source_info, "traceback", None)
            with source_info_util.user_context(traceback), eqn.ctx.manager:
                return self._eqn(eqn, values)

        bindings = [*zip(jaxpr.constvars, consts, strict=True)]
        bindings += zip(jaxpr.invars, args, strict=True)
        return evaluate_eqns(jaxpr, bindings, apply)

    def _eqn(self, eqn: Any, values: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        if name == "program_id":
            return [jnp.asarray(self.env[eqn.params["axis"]].index, jnp.int32)]
        if name == "num_programs":
            return [jnp.asarray(self.env[eqn.params["axis"]].size, jnp.int32)]
        if name in HOST_PRINTS and not eqn.outvars:
            # The checks' run prints nothing (the run did), and JAX would unroll a print
            # once per program batched: 10^5 programs, 10^5 callbacks to compile.
            return []
        if name in CONTROL_FLOW:
            return list(getattr(self, f"_{name}")(eqn, values))
        holds_ref = any(isinstance(v, Handle) for v in values)
        if name in CALL_PRIMITIVES or (
            not holds_ref and any(uses_grid(sub) for sub in jax_core.jaxprs_in_params(eqn.params))
        ):
            for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
                sub = eqn.params.get(key)
                inner = getattr(sub, "jaxpr", sub)
                if inner is not None and hasattr(inner, "eqns"):
                    return self.evaluate(inner, list(getattr(sub, "consts", [])), values)
        if holds_ref:
            return self._stateful(eqn, values)
        return bind(eqn, values)

    # -- loads and stores ---------------------------------------------------------------

    def _stateful(self, eqn: Any, values: list[Any]) -> list[Any]:
        """An equation on refs: Pallas' discharge rule, plus the records."""
        rule = _RULES.get(eqn.primitive)
        if rule is None:
            raise UnsupportedError(f"{eqn.primitive.name} on a ref")
        invals = [self.state[v.key] if isinstance(v, Handle) else v for v in values]
        in_avals = [v.aval for v in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        if _CONTEXT is not None:
            fields = {f.name for f in dataclasses.fields(_CONTEXT)}
            context = {
                "in_avals": in_avals,
                "out_avals": out_avals,
                "should_discharge": [isinstance(a, _AbstractRef) for a in in_avals],
                "strip_memory_space": True,
            }
            new_invals, result = rule(
                _CONTEXT(**{k: v for k, v in context.items() if k in fields}),
                *invals,
                **eqn.params,
            )
        else:
            new_invals, result = rule(in_avals, out_avals, *invals, **eqn.params)
        for value, new in zip(values, new_invals, strict=False):
            if isinstance(value, Handle) and new is not None:
                self.state[value.key] = new
        site = self.by_eqn.get(id(eqn))
        if site is not None:
            result = self._record(eqn, site, values, result)
        if eqn.primitive.multiple_results:
            return list(result)
        return [result] if eqn.outvars else []

    def _record(self, eqn: Any, site: AccessSite, values: list[Any], result: Any) -> Any:
        handle, transforms, mask = _unpack(eqn, values)
        if not isinstance(handle, Handle):
            return result
        block = self.blocks.get(handle.key)
        tracked = block is not None and (block in self.probe.stats or block in self.probe.stored)
        fill = site.index in self.fills and site.kind == "load" and site.masked and not site.other
        if not (self.probe.flags or tracked or fill):
            return result
        window = window_of(transforms, handle.shape)
        if not (tracked or fill) and mask is None and window is not None:
            # A window of slices and scalars, every lane on: its ends say it all.
            self._flag_window(site.index, window, handle.shape)
            return result
        lanes = lane_coordinates(transforms, handle.shape)
        if lanes is None:  # reshaped or bitcast views: lanes not followed
            return result
        coords, starts = lanes
        shape = coords[0].shape if coords else jnp.shape(result)
        enabled = (
            jnp.ones(shape, bool)
            if mask is None
            else jnp.broadcast_to(jnp.asarray(mask, bool), shape)
        )
        if fill:
            switch, value = self.fills[site.index]
            keep = enabled | ~jnp.asarray(switch, bool)
            result = jnp.where(keep, result, jnp.asarray(value, result.dtype))
        if not coords:  # a scalar ref: nothing can lie outside, one element to record
            coords = []
        outside = jnp.zeros(shape, bool)
        for c, n in zip(coords, handle.shape, strict=True):
            outside = outside | (c < 0) | (c >= n)
        if self.probe.flags:
            self._flag(site.index, coords, enabled, outside)
        if tracked and block is not None:
            touched = effective(coords, starts, handle.shape, masked=mask is not None)
            valid = enabled & ~outside if mask is not None else enabled
            self._track(block, site.kind, touched, valid, handle.shape)
        return result

    def _flag_window(
        self, index: int, window: list[tuple[Any, Any]], shape: tuple[int, ...]
    ) -> None:
        """Flags an unmasked access from its window's first and last element per dim."""
        hit = jnp.zeros((), bool)
        low, high = [], []
        for (first, last), n in zip(window, shape, strict=True):
            hit = hit | (first < 0) | (last >= n)
            low.append(first)
            high.append(last)
        zeros = [jnp.int32(0)] * (self.rank - len(window))
        self._merge_flag(index, hit, jnp.stack([*low, *zeros]), jnp.stack([*high, *zeros]))

    def _flag(self, index: int, coords: list[Any], enabled: Any, outside: Any) -> None:
        hit = jnp.any(enabled & outside)
        low, high = [], []
        for d in range(self.rank):
            if d < len(coords):
                c = coords[d]
                low.append(jnp.min(jnp.where(enabled, c, BIG)).astype(jnp.int32))
                high.append(jnp.max(jnp.where(enabled, c, -BIG)).astype(jnp.int32))
            else:
                low.append(jnp.int32(0))
                high.append(jnp.int32(0))
        self._merge_flag(index, hit, jnp.stack(low), jnp.stack(high))

    def _merge_flag(self, index: int, hit: Any, lows: Any, highs: Any) -> None:
        state = self.state
        flags, low, high = state["flags"], state["low"], state["high"]
        state["flags"] = flags.at[index].set(flags[index] | hit)
        state["low"] = low.at[index].set(jnp.where(hit, jnp.minimum(low[index], lows), low[index]))
        state["high"] = high.at[index].set(
            jnp.where(hit, jnp.maximum(high[index], highs), high[index])
        )

    def _track(
        self, block: int, kind: str, coords: list[Any], valid: Any, shape: tuple[int, ...]
    ) -> None:
        state = self.state
        where = (
            tuple(
                jnp.clip(c, 0, max(n - 1, 0)).astype(jnp.int32)
                for c, n in zip(coords, shape, strict=True)
            )
            if coords
            else ()
        )
        program = self.program

        def scatter(name: str, reducer: str) -> None:
            key = record_key(name, block)
            if key not in state:
                return
            identity = BIG if reducer == "min" else -1
            values = jnp.where(valid, program, identity).astype(jnp.int32)
            at = state[key].at[where]
            state[key] = at.min(values) if reducer == "min" else at.max(values)

        if kind == "atomic":
            scatter("first_atomic", "min")
            scatter("last_atomic", "max")
        else:
            scatter("first_touch", "min")
            scatter("last_touch", "max")
            if kind in ("store", "update"):
                scatter("first_store", "min")
                scatter("last_store", "max")
        key = record_key("atomic" if kind == "atomic" else "stored", block)
        if kind != "load" and key in state:
            state[key] = state[key].at[where].max(valid.astype(jnp.uint8))

    # -- control flow -------------------------------------------------------------------

    def _split(
        self, values: Sequence[Any]
    ) -> tuple[list[Any], Callable[[Sequence[Any]], list[Any]]]:
        """Arrays among `values` (to pass through JAX), and how to put the refs back."""
        arrays = [v for v in values if not isinstance(v, Handle)]

        def rebuild(new: Sequence[Any]) -> list[Any]:
            it = iter(new)
            return [v if isinstance(v, Handle) else next(it) for v in values]

        return arrays, rebuild

    def _scan(self, eqn: Any, values: list[Any]) -> list[Any]:
        params = eqn.params
        closed = params["jaxpr"]
        num_consts, num_carry = scan_counts(params)
        consts = values[:num_consts]
        carry = values[num_consts : num_consts + num_carry]
        xs = values[num_consts + num_carry :]
        if any(isinstance(v, Handle) for v in (*carry, *xs)):
            raise UnsupportedError("a loop that carries a ref")

        def body(c: tuple[dict[str, Any], list[Any]], x: list[Any]) -> Any:
            state, values_in = c
            self.state = dict(state)
            outs = self.evaluate(closed.jaxpr, closed.consts, [*consts, *values_in, *x])
            return (dict(self.state), list(outs[:num_carry])), list(outs[num_carry:])

        (state, final), ys = lax.scan(
            body,
            (dict(self.state), list(carry)),
            list(xs),
            length=int(params["length"]),
            reverse=bool(params.get("reverse", False)),
            unroll=params.get("unroll", 1),
        )
        self.state = dict(state)
        return [*final, *ys]

    def _while(self, eqn: Any, values: list[Any]) -> list[Any]:
        params = eqn.params
        cond, body = params["cond_jaxpr"], params["body_jaxpr"]
        n_cond, n_body = int(params["cond_nconsts"]), int(params["body_nconsts"])
        cond_consts, body_consts = values[:n_cond], values[n_cond : n_cond + n_body]
        carry = values[n_cond + n_body :]
        if any(isinstance(v, Handle) for v in carry):
            raise UnsupportedError("a loop that carries a ref")

        def cond_fun(c: tuple[dict[str, Any], list[Any]]) -> Any:
            state, values_in = c
            saved = self.state
            self.state = dict(state)
            (go,) = self.evaluate(cond.jaxpr, cond.consts, [*cond_consts, *values_in])[:1]
            self.state = saved
            return go

        def body_fun(c: tuple[dict[str, Any], list[Any]]) -> Any:
            state, values_in = c
            self.state = dict(state)
            outs = self.evaluate(body.jaxpr, body.consts, [*body_consts, *values_in])
            return dict(self.state), list(outs)

        state, final = bounded_while_loop(
            cond_fun, body_fun, (dict(self.state), list(carry)), eqn_site(eqn)
        )
        self.state = dict(state)
        return list(final)

    def _cond(self, eqn: Any, values: list[Any]) -> list[Any]:
        index, *operands = values
        arrays, rebuild = self._split(operands)

        def branch(closed: Any) -> Callable[..., Any]:
            def run(state: dict[str, Any], given: list[Any]) -> Any:
                self.state = dict(state)
                outs = self.evaluate(closed.jaxpr, closed.consts, rebuild(given))
                return dict(self.state), list(outs)

            return run

        state, outs = lax.switch(
            index, [branch(b) for b in eqn.params["branches"]], dict(self.state), arrays
        )
        self.state = dict(state)
        return list(outs)

    def _run_scoped(self, eqn: Any, values: list[Any]) -> list[Any]:
        jaxpr = eqn.params["jaxpr"]
        handles = []
        for var in jaxpr.invars:
            aval = inner_aval(var.aval)
            shape = tuple(aval.shape)
            dtype = np.dtype(physical_dtype(aval.dtype))
            key = f"scoped{self.next_scoped}"
            self.next_scoped += 1
            self.state[key] = jnp.full(shape, uninitialized(dtype), dtype)
            handles.append(Handle(key, shape))
        outs = self.evaluate(jaxpr, values, handles)
        for handle in handles:
            self.state.pop(handle.key, None)
        return outs


def ref_key(position: int) -> str:
    return f"ref{position}"


def record_key(name: str, block: int) -> str:
    return f"{name}{block}"


def _unpack(eqn: Any, values: list[Any]) -> tuple[Any, tuple[Any, ...], Any]:
    """(ref, transforms, mask) of an access equation."""
    name = eqn.primitive.name
    if name in ("masked_load", "masked_swap", "atomic_rmw"):
        unflat = tree_util.tree_unflatten(eqn.params["args_tree"], values)
        if name == "masked_load":
            ref, transforms, mask, _ = unflat
        else:
            ref, transforms, _, mask = unflat
        return ref, tuple(transforms or ()), mask
    skip = 1 if name == "get" else 2
    transforms = tree_util.tree_unflatten(eqn.params["tree"], values[skip:])
    return values[0], tuple(transforms or ()), None
