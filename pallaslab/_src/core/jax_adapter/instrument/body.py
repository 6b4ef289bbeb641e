"""A pallas_call's kernel body, instrumented: `instrumented_body` and what it needs of JAX."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp

from pallaslab._src.core.jax_adapter.body_eval import (
    hlo_interpreter,
    inner_aval,
    missing,
    pallas_core,
    state_discharge,
    state_types,
)
from pallaslab._src.core.jax_adapter.instrument.evaluator import (
    Evaluator,
    Handle,
    record_key,
    ref_key,
)
from pallaslab._src.core.jax_adapter.instrument.records import (
    BIG,
    STATS,
    InstrumentedBody,
    Probe,
    Probed,
    UnsupportedError,
    empty_stats,
)
from pallaslab._src.core.jax_adapter.instrument.sites import find_sites
from pallaslab._src.core.jax_adapter.probes import state_indexing


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
    return missing(needed)


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
    sites, by_eqn = find_sites(physical)
    num_scalars = int(mapping.num_index_operands)
    num_blocks = len(mapping.block_mappings)
    ref_shapes = [tuple(inner_aval(v.aval).shape) for v in physical.invars]
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
        evaluator = Evaluator(
            env=env,
            by_eqn=by_eqn,
            program=jnp.asarray(program, jnp.int32),
            probe=probe,
            fills=dict(zip(probe.fills, fills, strict=True)),
            blocks={ref_key(num_scalars + k): k for k in range(num_blocks)},
            rank=rank,
            count=len(sites),
        )
        handles = [Handle(ref_key(k), ref_shapes[k]) for k in range(len(values))]
        state: dict[str, Any] = {ref_key(k): jnp.asarray(v) for k, v in enumerate(values)}
        for k in set(probe.stats) | set(probe.stored):
            shape = ref_shapes[num_scalars + k]
            if k in probe.stored:
                state[record_key("stored", k)] = jnp.zeros(shape, jnp.uint8)
                state[record_key("atomic", k)] = jnp.zeros(shape, jnp.uint8)
            if k in probe.stats:
                given = (stats or {}).get(k) or empty_stats(shape)
                for name in STATS:
                    state[record_key(name, k)] = jnp.asarray(given[name], jnp.int32)
        if probe.flags:
            state["flags"] = jnp.zeros((len(sites),), bool)
            state["low"] = jnp.full((len(sites), rank), BIG, jnp.int32)
            state["high"] = jnp.full((len(sites), rank), -BIG, jnp.int32)
        evaluator.state = state
        evaluator.evaluate(physical, consts, handles)
        final = evaluator.state
        new_blocks = [final[ref_key(num_scalars + k)] for k in range(num_blocks)]
        new_scratch = [final[ref_key(num_scalars + num_blocks + j)] for j in range(len(scratch))]
        none = jnp.zeros((len(sites),), bool)
        probed = Probed(
            flags=final.get("flags", none),
            low=final.get("low", jnp.zeros((len(sites), rank), jnp.int32)),
            high=final.get("high", jnp.zeros((len(sites), rank), jnp.int32)),
            stats={k: {n: final[record_key(n, k)] for n in STATS} for k in probe.stats},
            stored={
                k: (final[record_key("stored", k)] > 0, final[record_key("atomic", k)] > 0)
                for k in probe.stored
            },
        )
        return new_blocks, new_scratch, probed

    return InstrumentedBody(tuple(sites), rank, tuple(ref_shapes), run)
