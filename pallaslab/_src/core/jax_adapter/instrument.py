"""A kernel body instrumented for checks: what every load and store touched, lane by lane.

The emulator runs Pallas' discharged body (`emulation.py`). For its checks, this module
evaluates the kernel body itself, before discharge, on JAX values: each load and store
is done with Pallas' own discharge rule for it (so values are exactly those of
interpret mode) and, beside it, what the access touched is recorded, as JAX values, so
the whole thing runs vectorised over programs like the body does:

- per access site (one load or store of the source), whether an enabled lane lay
  outside its ref: a dynamic `pl.ds` or index that JAX clamps into the block, or a
  masked load or store whose enabled lanes leave the array;
- for chosen refs, which elements the program stored (programs that share an array
  write back only those, in GPU-like orders), and, across programs, the first and last
  program that stored or touched each element (races between programs that share an
  array, decided element by element);
- for masked loads without `other=`, the masked-out lanes replaced by a given value (a
  check varies it to see whether those lanes reach an output).

Loops, branches, calls and scoped buffers are followed: the refs and the records are
carried through `lax.scan`, `lax.while_loop` and `lax.switch` rebuilt over the bodies.
Private shapes read here are pinned in tests/test_jax_adapter.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from pallaslab._src.core.jax_adapter.kernels import user_location
from pallaslab._src.core.jax_adapter.lanes import lane_indices
from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    jax_core,
    source_info_util,
    state_indexing,
    tree_util,
)

try:
    from jax._src.pallas import core as pallas_core
    from jax._src.pallas import hlo_interpreter
    from jax._src.state import discharge as state_discharge
    from jax._src.state import types as state_types
except ImportError:  # pragma: no cover - instrumentation is then unavailable
    pallas_core = None  # type: ignore[assignment]
    hlo_interpreter = None  # type: ignore[assignment]
    state_discharge = None  # type: ignore[assignment]
    state_types = None  # type: ignore[assignment]

_RULES: Any = getattr(state_discharge, "_discharge_rules", None)
# Newer JAX passes discharge rules one context object instead of the avals.
_CONTEXT: Any = getattr(state_discharge, "DischargeContext", None)
_NDIndexer: Any = getattr(state_indexing, "NDIndexer", None)
_Slice: Any = getattr(state_indexing, "Slice", None)
_AbstractRef: Any = getattr(state_types, "AbstractRef", None)


def unavailable() -> str:
    """Why instrumentation does not work with this JAX ("" when it does)."""
    needed = (
        (state_discharge, "_discharge_rules"),
        (state_indexing, "NDIndexer"),
        (state_indexing, "Slice"),
        (state_types, "AbstractRef"),
        (hlo_interpreter, "resolve_physical_types"),
        (pallas_core, "GridAxis"),
    )
    for module, name in needed:
        if module is None or not hasattr(module, name):
            return f"{getattr(module, '__name__', module)}.{name} not found"
    return ""


# Primitives that load or store through a ref, and what they do to it.
_KINDS = {
    "get": "load",
    "masked_load": "load",
    "swap": "store",
    "masked_swap": "store",
    "addupdate": "update",
    "atomic_rmw": "atomic",
}
_BIG = np.iinfo(np.int32).max


@dataclasses.dataclass(frozen=True)
class AccessSite:
    """One load or store of a kernel body (plain values).

    Attributes:
        index: Its number among the body's sites.
        kind: "load", "store", "update" (`+=`) or "atomic".
        primitive: The JAX primitive ("get", "masked_load", ...).
        ref: The kernel operand it accesses (its position among the body's refs),
            -1 for a buffer of `pl.run_scoped`, -2 when unknown.
        masked: Whether it has a mask (`pltriton.load(..., mask=)`).
        other: For masked loads, whether `other=` gives the masked-out lanes a value.
        dynamic: Whether an index is computed while the kernel runs.
        file: Its source file ("" when unknown).
        line: Its line (0 when unknown).
    """

    index: int
    kind: str
    primitive: str
    ref: int
    masked: bool
    other: bool
    dynamic: bool
    file: str = ""
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Probe:
    """What an instrumented run records (hashable: part of what is traced).

    Attributes:
        flags: Per site, whether an enabled lane lay outside its ref, and the
            elements it reached.
        fills: Masked loads without `other=` (site indices) whose masked-out lanes
            may take other values: per site, `fills` passes (switch, value), and the
            lanes take `value` where `switch` is true (as loaded otherwise).
        stats: Blocks (indices among the kernel's blocked operands) whose elements'
            first and last storing and touching programs are accumulated.
        stored: Blocks whose elements each program stored are returned.
    """

    flags: bool = False
    fills: tuple[int, ...] = ()
    stats: tuple[int, ...] = ()
    stored: tuple[int, ...] = ()


# Per tracked block, the accumulated records: first and last program (linear index)
# that stored, touched (loaded or stored) and atomically updated each element.
STATS = ("first_store", "last_store", "first_touch", "last_touch", "first_atomic", "last_atomic")


def empty_stats(shape: Sequence[int]) -> dict[str, Any]:
    """Records of no program: firsts at the largest int32, lasts at -1."""
    return {
        name: jnp.full(tuple(shape), _BIG if name.startswith("first") else -1, jnp.int32)
        for name in STATS
    }


class Probed(NamedTuple):
    """What one program's instrumented run recorded (JAX values).

    Attributes:
        flags: (sites,) whether the site reached outside its ref with an enabled lane.
        low: (sites, rank) the smallest element coordinate such an access reached.
        high: (sites, rank) the largest.
        stats: Per tracked block, the records of `STATS`, updated with this program.
        stored: Per block asked for, which elements this program stored (bool), and
            which it updated atomically.
    """

    flags: Any
    low: Any
    high: Any
    stats: dict[int, dict[str, Any]]
    stored: dict[int, tuple[Any, Any]]


@dataclasses.dataclass(frozen=True)
class InstrumentedBody:
    """A kernel body that runs one program and records what `Probe` asks.

    Attributes:
        sites: Every load and store of the body, in order.
        rank: The largest rank of a ref (coordinates recorded per site).
        ref_shapes: The shape of each ref the body takes (its block), in order.
        run: `run(pids, scalars, blocks, scratch, program, probe, fills, stats)`
            returns `(blocks, scratch, Probed)`: pids one int32 per grid axis,
            `program` the program's linear index (int32), `fills` one (switch, value) per
            `probe.fills` site, `stats` per `probe.stats` block its records so far.
    """

    sites: tuple[AccessSite, ...]
    rank: int
    ref_shapes: tuple[tuple[int, ...], ...]
    run: Callable[..., tuple[list[Any], list[Any], Probed]] = dataclasses.field(
        repr=False, compare=False
    )


class UnsupportedError(Exception):
    """The body does something the instrumented evaluator does not follow."""


@dataclasses.dataclass(frozen=True, eq=False)
class _Handle:
    """A ref during evaluation: its key in the state and its shape."""

    key: str
    shape: tuple[int, ...]


def instrumented_body(params: dict[str, Any], grid: Sequence[int]) -> InstrumentedBody:
    """The kernel body of a pallas_call, instrumented (see the module docstring).

    Raises:
        UnsupportedError: When this JAX lacks what instrumentation reads.
    """
    if why := unavailable():
        raise UnsupportedError(why)
    jaxpr = params["jaxpr"]
    mapping = params["grid_mapping"]
    vmapped = {int(d) for d in mapping.vmapped_dims}
    with mapping.trace_env():
        physical, consts = hlo_interpreter.resolve_physical_types(jaxpr, ())
    sites, by_eqn = _find_sites(physical)
    num_scalars = int(mapping.num_index_operands)
    num_blocks = len(mapping.block_mappings)
    ref_shapes = [tuple(_inner(v.aval).shape) for v in physical.invars]
    rank = max([1, *(len(s) for s in ref_shapes)])
    grid = tuple(int(g) for g in grid)

    def run(
        pids: Sequence[Any],
        scalars: Sequence[Any],
        blocks: Sequence[Any],
        scratch: Sequence[Any],
        *,
        program: Any,
        probe: Probe,
        fills: Sequence[Any] = (),
        stats: dict[int, dict[str, Any]] | None = None,
    ) -> tuple[list[Any], list[Any], Probed]:
        if mapping.local_grid_env is not None:
            env = mapping.local_grid_env(tuple(pids), grid)
        else:
            env = tuple(
                pallas_core.GridAxis(pids[d], grid[d]) for d in range(len(grid)) if d not in vmapped
            )
        values = [*scalars, *blocks, *scratch]
        if len(values) != len(physical.invars):
            raise UnsupportedError("the body takes other refs than the kernel's operands")
        evaluator = _Evaluator(
            env=env,
            by_eqn=by_eqn,
            program=jnp.asarray(program, jnp.int32),
            probe=probe,
            fills=dict(zip(probe.fills, fills, strict=True)),
            blocks={_ref_key(num_scalars + k): k for k in range(num_blocks)},
            rank=rank,
            count=len(sites),
        )
        handles = [_Handle(_ref_key(k), ref_shapes[k]) for k in range(len(values))]
        state: dict[str, Any] = {_ref_key(k): jnp.asarray(v) for k, v in enumerate(values)}
        for k in set(probe.stats) | set(probe.stored):
            shape = ref_shapes[num_scalars + k]
            if k in probe.stored:
                state[_record_key("stored", k)] = jnp.zeros(shape, jnp.uint8)
                state[_record_key("atomic", k)] = jnp.zeros(shape, jnp.uint8)
            if k in probe.stats:
                given = (stats or {}).get(k) or empty_stats(shape)
                for name in STATS:
                    state[_record_key(name, k)] = jnp.asarray(given[name], jnp.int32)
        if probe.flags:
            state["flags"] = jnp.zeros((len(sites),), bool)
            state["low"] = jnp.full((len(sites), rank), _BIG, jnp.int32)
            state["high"] = jnp.full((len(sites), rank), -_BIG, jnp.int32)
        evaluator.state = state
        evaluator.evaluate(physical, consts, handles)
        final = evaluator.state
        new_blocks = [final[_ref_key(num_scalars + k)] for k in range(num_blocks)]
        new_scratch = [final[_ref_key(num_scalars + num_blocks + j)] for j in range(len(scratch))]
        none = jnp.zeros((len(sites),), bool)
        probed = Probed(
            flags=final.get("flags", none),
            low=final.get("low", jnp.zeros((len(sites), rank), jnp.int32)),
            high=final.get("high", jnp.zeros((len(sites), rank), jnp.int32)),
            stats={k: {n: final[_record_key(n, k)] for n in STATS} for k in probe.stats},
            stored={
                k: (final[_record_key("stored", k)] > 0, final[_record_key("atomic", k)] > 0)
                for k in probe.stored
            },
        )
        return new_blocks, new_scratch, probed

    return InstrumentedBody(tuple(sites), rank, tuple(ref_shapes), run)


# ---------------------------------------------------------------------------
# Finding the access sites, and which ref each touches.


def _find_sites(jaxpr: Any) -> tuple[list[AccessSite], dict[int, AccessSite]]:
    sites: list[AccessSite] = []
    by_eqn: dict[int, AccessSite] = {}

    def walk(inner: Any, refs: dict[Any, int]) -> None:
        for eqn in inner.eqns:
            name = eqn.primitive.name
            if name in _KINDS:
                ref_var = eqn.invars[0]
                masked, other, dynamic = _access_facts(eqn)
                file, line = _where(eqn)
                site = AccessSite(
                    index=len(sites),
                    kind=_KINDS[name],
                    primitive=name,
                    ref=refs.get(ref_var, -2),
                    masked=masked,
                    other=other,
                    dynamic=dynamic,
                    file=file,
                    line=line,
                )
                sites.append(site)
                by_eqn[id(eqn)] = site
                continue
            for sub, mapping in _sub_bindings(eqn, refs):
                walk(sub, mapping)

    walk(jaxpr, {v: k for k, v in enumerate(jaxpr.invars)})
    return sites, by_eqn


def _access_facts(eqn: Any) -> tuple[bool, bool, bool]:
    """(masked, has other, any index dynamic) of an access equation."""
    name = eqn.primitive.name
    masked = other = False
    if name in ("masked_load", "masked_swap", "atomic_rmw"):
        unflat = tree_util.tree_unflatten(eqn.params["args_tree"], list(eqn.invars))
        if name == "masked_load":
            _, transforms, mask, value = unflat
            other = value is not None
        else:
            _, transforms, _, mask = unflat
        masked = mask is not None
        leaves = tree_util.tree_leaves(transforms)
    else:
        skip = 1 if name == "get" else 2
        leaves = list(eqn.invars[skip:])
    dynamic = any(not isinstance(v, jax_core.Literal) for v in leaves)
    return masked, other, dynamic


def _sub_bindings(eqn: Any, refs: dict[Any, int]) -> list[tuple[Any, dict[Any, int]]]:
    """Sub-jaxprs of an equation, each with its invars mapped to the refs they hold."""
    name = eqn.primitive.name
    params = eqn.params

    def bound(inner: Any, outer: Sequence[Any]) -> dict[Any, int]:
        return {
            v: refs[o]
            for v, o in zip(inner.invars, outer, strict=False)
            if not isinstance(o, jax_core.Literal) and o in refs
        }

    if name == "scan":
        body = params["jaxpr"].jaxpr
        return [(body, bound(body, eqn.invars))]
    if name == "while":
        cond, body = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr
        nc, nb = int(params["cond_nconsts"]), int(params["body_nconsts"])
        carry = list(eqn.invars[nc + nb :])
        return [
            (cond, bound(cond, [*eqn.invars[:nc], *carry])),
            (body, bound(body, [*eqn.invars[nc : nc + nb], *carry])),
        ]
    if name == "cond":
        return [(b.jaxpr, bound(b.jaxpr, eqn.invars[1:])) for b in params["branches"]]
    if name == "run_scoped":
        body = params["jaxpr"]
        mapping = {
            v: refs[o]
            for v, o in zip(body.constvars, eqn.invars, strict=False)
            if not isinstance(o, jax_core.Literal) and o in refs
        }
        mapping.update(dict.fromkeys(body.invars, -1))
        return [(body, mapping)]
    found = []
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = params.get(key)
        inner = getattr(sub, "jaxpr", sub)
        if inner is not None and hasattr(inner, "eqns"):
            found.append((inner, bound(inner, eqn.invars)))
            break
    return found


def _where(eqn: Any) -> tuple[str, int]:
    location = user_location(eqn.source_info)
    return (location.file, location.line) if location is not None else ("", 0)


def _inner(aval: Any) -> Any:
    return getattr(aval, "inner_aval", aval)


# ---------------------------------------------------------------------------
# The evaluator.


class _Evaluator:
    """Evaluates a stateful kernel jaxpr on JAX values, refs held in `state`."""

    def __init__(
        self,
        *,
        env: Any,
        by_eqn: dict[int, AccessSite],
        program: Any,
        probe: Probe,
        fills: dict[int, Any],
        blocks: dict[str, int],
        rank: int,
        count: int,
    ) -> None:
        self.env = env
        self.by_eqn = by_eqn
        self.program = program
        self.probe = probe
        self.fills = fills
        self.blocks = blocks  # ref key -> block index, for the body's blocked operands
        self.rank = rank
        self.count = count
        self.state: dict[str, Any] = {}
        self.next_scoped = 0

    def evaluate(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        env: dict[str, Any] = {}

        def read(atom: Any) -> Any:
            return atom.val if isinstance(atom, jax_core.Literal) else env[atom]

        env.update(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))
        for eqn in jaxpr.eqns:
            values = [read(v) for v in eqn.invars]
            traceback = getattr(eqn.source_info, "traceback", None)
            with source_info_util.user_context(traceback), eqn.ctx.manager:
                outs = self._eqn(eqn, values)
            env.update(
                (var, value)
                for var, value in zip(eqn.outvars, outs, strict=True)
                if not isinstance(var, jax_core.DropVar)
            )
        return [read(v) for v in jaxpr.outvars]

    def _eqn(self, eqn: Any, values: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        if name == "program_id":
            return [jnp.asarray(self.env[eqn.params["axis"]].index, jnp.int32)]
        if name == "num_programs":
            return [jnp.asarray(self.env[eqn.params["axis"]].size, jnp.int32)]
        if name == "scan":
            return self._scan(eqn, values)
        if name == "while":
            return self._while(eqn, values)
        if name == "cond":
            return self._cond(eqn, values)
        if name == "run_scoped":
            return self._run_scoped(eqn, values)
        holds_ref = any(isinstance(v, _Handle) for v in values)
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
        params = eqn.primitive.get_bind_params(eqn.params)
        subfuns: Sequence[Any] = ()
        if isinstance(params, tuple):  # older JAX: (subfuns, params)
            subfuns, params = params
        result = eqn.primitive.bind(*subfuns, *values, **params)
        return list(result) if eqn.primitive.multiple_results else [result]

    # -- loads and stores ---------------------------------------------------------------

    def _stateful(self, eqn: Any, values: list[Any]) -> list[Any]:
        """An equation on refs: Pallas' discharge rule, plus the records."""
        rule = _RULES.get(eqn.primitive)
        if rule is None:
            raise UnsupportedError(f"{eqn.primitive.name} on a ref")
        invals = [self.state[v.key] if isinstance(v, _Handle) else v for v in values]
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
            if isinstance(value, _Handle) and new is not None:
                self.state[value.key] = new
        site = self.by_eqn.get(id(eqn))
        if site is not None:
            result = self._record(eqn, site, values, result)
        if eqn.primitive.multiple_results:
            return list(result)
        return [result] if eqn.outvars else []

    def _record(self, eqn: Any, site: AccessSite, values: list[Any], result: Any) -> Any:
        handle, transforms, mask = _unpack(eqn, values)
        if not isinstance(handle, _Handle):
            return result
        block = self.blocks.get(handle.key)
        tracked = block is not None and (block in self.probe.stats or block in self.probe.stored)
        fill = site.index in self.fills and site.kind == "load" and site.masked and not site.other
        if not (self.probe.flags or tracked or fill):
            return result
        window = _window(transforms, handle.shape)
        if not (tracked or fill) and mask is None and window is not None:
            # A window of slices and scalars, every lane on: its ends say it all.
            self._flag_window(site.index, window, handle.shape)
            return result
        lanes = _lane_coordinates(transforms, handle.shape)
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
            effective = _effective(coords, starts, handle.shape, masked=mask is not None)
            valid = enabled & ~outside if mask is not None else enabled
            self._track(block, site.kind, effective, valid, handle.shape)
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
                low.append(jnp.min(jnp.where(enabled, c, _BIG)).astype(jnp.int32))
                high.append(jnp.max(jnp.where(enabled, c, -_BIG)).astype(jnp.int32))
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
            key = _record_key(name, block)
            if key not in state:
                return
            identity = _BIG if reducer == "min" else -1
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
        key = _record_key("atomic" if kind == "atomic" else "stored", block)
        if kind != "load" and key in state:
            state[key] = state[key].at[where].max(valid.astype(jnp.uint8))

    # -- control flow -------------------------------------------------------------------

    def _split(
        self, values: Sequence[Any]
    ) -> tuple[list[Any], Callable[[Sequence[Any]], list[Any]]]:
        """Arrays among `values` (to pass through JAX), and how to put the refs back."""
        arrays = [v for v in values if not isinstance(v, _Handle)]

        def rebuild(new: Sequence[Any]) -> list[Any]:
            it = iter(new)
            return [v if isinstance(v, _Handle) else next(it) for v in values]

        return arrays, rebuild

    def _scan(self, eqn: Any, values: list[Any]) -> list[Any]:
        params = eqn.params
        closed = params["jaxpr"]
        num_consts, num_carry = int(params["num_consts"]), int(params["num_carry"])
        consts = values[:num_consts]
        carry = values[num_consts : num_consts + num_carry]
        xs = values[num_consts + num_carry :]
        if any(isinstance(v, _Handle) for v in (*carry, *xs)):
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
        if any(isinstance(v, _Handle) for v in carry):
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

        state, final = lax.while_loop(cond_fun, body_fun, (dict(self.state), list(carry)))
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
            aval = _inner(var.aval)
            shape = tuple(aval.shape)
            dtype = np.dtype(_physical(aval.dtype))
            key = f"scoped{self.next_scoped}"
            self.next_scoped += 1
            self.state[key] = jnp.full(shape, _uninitialized(dtype), dtype)
            handles.append(_Handle(key, shape))
        outs = self.evaluate(jaxpr, values, handles)
        for handle in handles:
            self.state.pop(handle.key, None)
        return outs


def _ref_key(position: int) -> str:
    return f"ref{position}"


def _record_key(name: str, block: int) -> str:
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


def _physical(dtype: Any) -> Any:
    rules = getattr(dtype, "_rules", None)
    if rules is not None and hasattr(rules, "pallas_interpret_element_aval"):
        return rules.pallas_interpret_element_aval(dtype).dtype
    return dtype


def _uninitialized(dtype: np.dtype[Any]) -> Any:
    if dtype.kind in "fc" or "float" in dtype.name:
        return np.asarray(np.nan).astype(dtype)
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return 0


# ---------------------------------------------------------------------------
# Lane coordinates: for each lane of a load or store, the element of the ref it touches.


def _lane_coordinates(
    transforms: Sequence[Any], shape: tuple[int, ...]
) -> tuple[list[Any], list[tuple[Any, int]] | None] | None:
    """Per ref dimension, the coordinate each lane touches (past the view's edges too).

    Also, for a single indexer of slices and scalars (which the discharge does with a
    dynamic slice, clamping its start), each dimension's (start, extent); else None.
    None for views the lanes of which are not followed (bitcasts, reshapes).
    """
    if not transforms:
        grids = [jnp.asarray(g) for g in np.indices(shape, dtype=np.int32)] if shape else []
        return grids, None
    if not all(isinstance(t, _NDIndexer) for t in transforms):
        return None
    coords: list[Any] | None = None
    steps: list[tuple[int, ...] | None] = []
    for indexer in transforms:
        coords, steps = _apply_indexer(coords, steps, indexer, len(shape))
    starts: list[tuple[Any, int]] | None = None
    if len(transforms) == 1:
        starts = []
        for index in transforms[0].indices:
            if isinstance(index, _Slice):
                starts.append((index.start, (int(index.size) - 1) * int(index.stride) + 1))
            elif not jnp.shape(index):
                starts.append((index, 1))
            else:
                starts = None
                break
    return list(coords or []), starts


def _window(transforms: Sequence[Any], shape: tuple[int, ...]) -> list[tuple[Any, Any]] | None:
    """Per dimension, the first and last element a single indexer selects.

    For an indexer of slices and scalars (int32 values); None for other views (arrays,
    chains, bitcasts).
    """
    if len(transforms) != 1 or not isinstance(transforms[0], _NDIndexer):
        return None
    window = []
    for index in transforms[0].indices:
        if isinstance(index, _Slice):
            start = jnp.asarray(index.start, jnp.int32)
            window.append((start, start + (int(index.size) - 1) * int(index.stride)))
        elif not jnp.shape(index):
            value = jnp.asarray(index, jnp.int32)
            window.append((value, value))
        else:
            return None
    return window if len(window) == len(shape) else None


def _apply_indexer(
    coords: list[Any] | None,
    steps: list[tuple[int, ...] | None],
    indexer: Any,
    rank: int,
) -> tuple[list[Any], list[tuple[int, ...] | None]]:
    """The lanes of `view[indexer]`, NumPy-style, as `NDIndexer` defines them.

    `coords` None stands for the whole ref (each lane's coordinate is its index).
    """
    per_dim: list[tuple[Any, bool]] = []
    strides: list[int] = []
    for index in indexer.indices:
        if isinstance(index, _Slice):
            size, stride = int(index.size), int(index.stride)
            start = jnp.asarray(index.start, jnp.int32)
            per_dim.append((start + stride * jnp.arange(size, dtype=jnp.int32), True))
            strides.append(stride)
        else:
            per_dim.append((jnp.asarray(index, jnp.int32), False))
            strides.append(0)
    int_shape = (
        tuple(int(n) for n in indexer.int_indexer_shape) if not all(s for _, s in per_dim) else ()
    )
    arrays, targets = lane_indices(per_dim, int_shape, jnp)
    out_rank = len(targets[0]) if targets else 0
    view_shape = tuple(int(n) for n in indexer.shape)
    new_coords = []
    if coords is None:  # the whole ref: a lane's coordinate is its index
        new_coords = list(arrays)
        base_steps: list[tuple[int, ...] | None] = [
            tuple(1 if d == k else 0 for d in range(rank)) for k in range(rank)
        ]
    else:
        clipped = [jnp.clip(a, 0, max(n - 1, 0)) for a, n in zip(arrays, view_shape, strict=True)]
        base_steps = steps
        for d in range(rank):
            base = coords[d][tuple(clipped)] if clipped else coords[d]
            for k, (a, c) in enumerate(zip(arrays, clipped, strict=True)):
                step = steps[k]
                if step is not None and step[d]:
                    base = base + (a - c) * step[d]
            new_coords.append(jnp.asarray(base, jnp.int32))
    new_steps: list[tuple[int, ...] | None] = [None] * out_rank
    for k, (_, sliced) in enumerate(per_dim):
        old = base_steps[k] if k < len(base_steps) else None
        if sliced and old is not None:
            new_steps[targets[k].index(-1)] = tuple(strides[k] * s for s in old)
    return new_coords, new_steps


def _effective(
    coords: list[Any],
    starts: list[tuple[Any, int]] | None,
    shape: tuple[int, ...],
    *,
    masked: bool,
) -> list[Any]:
    """The elements an access really touched in the emulation.

    Masked accesses drop lanes outside the ref (Pallas pads for them); an unmasked
    dynamic slice is clamped to fit, as `lax.dynamic_slice` does.
    """
    if masked:
        return coords
    if starts is None:
        return [jnp.clip(c, 0, max(n - 1, 0)) for c, n in zip(coords, shape, strict=True)]
    shifted = []
    for c, (given, extent), n in zip(coords, starts, shape, strict=True):
        start = jnp.asarray(given, jnp.int32)
        clamped = jnp.clip(start, 0, max(n - extent, 0))
        shifted.append(c + (clamped - start))
    return shifted


_GRID_PRIMITIVES = frozenset({"program_id", "num_programs"})


def uses_grid(jaxpr: Any) -> bool:
    """Whether a jaxpr (or one inside it) reads the grid: `program_id`, `num_programs`."""
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name in _GRID_PRIMITIVES:
            return True
        if any(uses_grid(sub) for sub in jax_core.jaxprs_in_params(eqn.params)):
            return True
    return False
