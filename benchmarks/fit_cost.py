"""Time to compute memory fit and static cost for the seed matmul on every chip: cold, then cached.

Goal (issue 22): the whole table (TPU v4, v5e, v5p, v6e, 7x with libtpu; A100, H100,
H200, B200 with XLA's GPU compile) under 5 s cold with the compiles run in parallel,
under 50 ms warm.

The kernel: the seed tutorial's matmul (bf16, 1024^3, 128 x 128 output tiles, a
`fori_loop` over K in steps of 128), written with plain ref indexing as notebook 04
writes it: the tutorial's own `pltriton.load` is Triton-only, and no TPU takes it.

Columns:
- cold: a fresh inspection (nothing cached): `fit_table` over every chip (each chip one
  compile in a worker process, `parallel` at once; a chip over its limit compiles
  twice) and `cost_table` of each chip's compile;
- warm: the same asked again (every compile cached);
- cpu: CPU seconds of the cold pass, this process and its workers together;
- load: the 1-minute load average (2 CPUs: above 2, wall times stretch).

Run: python benchmarks/fit_cost.py [--parallel N] [--chips v5e,H100]
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import cost, fit
from pallaslab._src.core.lowering import toolchains
from pallaslab._src.records import targets

SIZE, BLOCK, BLOCK_K = 1024, 128, 128
COLD_GOAL_S, WARM_GOAL_MS = 5.0, 50.0


def matmul_kernel(a_ref, b_ref, c_ref, *, steps):
    def body(t, acc):
        k = pl.ds(t * BLOCK_K, BLOCK_K)
        return acc + jnp.dot(a_ref[:, k], b_ref[k, :], preferred_element_type=jnp.float32)

    acc = jax.lax.fori_loop(0, steps, body, jnp.zeros(c_ref.shape, jnp.float32))
    c_ref[...] = acc.astype(c_ref.dtype)


def seed_matmul(a, b):
    (m, k), (_, n) = a.shape, b.shape
    return pl.pallas_call(
        functools.partial(matmul_kernel, steps=k // BLOCK_K),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // BLOCK, n // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
    )(a, b)


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def fit_and_cost(inspection: pallaslab.types.Inspection, chips: tuple[str, ...], parallel: int):
    table = inspection.fit_table(chips=chips, parallel=parallel)
    costs = {}
    for row in table.rows:
        lowered = inspection.lower(row.target)
        try:
            costs[row.chip] = cost.of_lowered(lowered)
        except cost.CostUnavailableError as error:
            costs[row.chip] = str(error)
    return table, costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=fit.PARALLEL)
    parser.add_argument("--chips", default=",".join(fit.CHIPS))
    args = parser.parse_args()
    chips = tuple(args.chips.split(","))
    missing = toolchains.unavailable_reasons(
        [
            targets.parse_target(f"{'tpu-compile' if c in fit.TPU_CHIPS else 'xla-gpu'}:{c}")
            for c in chips
        ]
    )
    for name, reason in missing.items():
        if reason:
            print(f"{name}: {reason}")
    spec = jax.ShapeDtypeStruct((SIZE, SIZE), jnp.bfloat16)
    inspection = pallaslab.inspect(seed_matmul, spec, spec)
    load = os.getloadavg()[0]
    cpu = _cpu_seconds()
    started = time.perf_counter()
    table, costs = fit_and_cost(inspection, chips, args.parallel)
    cold = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    started = time.perf_counter()
    fit_and_cost(inspection, chips, args.parallel)
    warm_ms = 1000 * (time.perf_counter() - started)

    print(f"seed matmul bf16 {SIZE}^3, blocks {BLOCK}x{BLOCK}, K steps of {BLOCK_K}:")
    print(f"{'chip':6s} {'verdict':34s} {'needed':>10s} {'limit':>10s}  static cost")
    for row in table.rows:
        found = costs[row.chip]
        if isinstance(found, str):
            what = found[:60]
        elif found.kind == "tpu":
            what = f"{found.loop_bundles} bundles per pass (~{found.cycles_estimate} cycles)"
        else:
            what = (
                f"{found.total_instructions} SASS instructions, "
                f"{found.cycles_estimate} stall cycles"
            )
        needed = f"{row.needed:,}" if row.needed is not None else "?"
        print(f"{row.chip:6s} {row.verdict_text[:34]:34s} {needed:>10s} {row.limit:>10,}  {what}")
    print(
        f"cold: {cold:.1f} s (goal {COLD_GOAL_S:.0f} s; {args.parallel} compiles at once), "
        f"cpu {cpu:.1f} s, load {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"warm: {warm_ms:.1f} ms (goal {WARM_GOAL_MS:.0f} ms)")


if __name__ == "__main__":
    main()
