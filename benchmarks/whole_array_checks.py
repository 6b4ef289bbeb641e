"""What the element-level checks of whole-array kernels cost, next to the run itself.

Kernels in the Triton style take whole arrays and let each program store its part, so
the geometry cannot tell whether they race from blocks: pallaslab runs the kernel's
instrumented body over the grid (in grid order) recording, per element, the first and
last program that stored and touched it. That run costs about what the emulated run
costs (every program sees the whole array), so programs x elements bounds it: past
`sharing.MAX_ELEMENT_WORK`, runs of consecutive programs spread over the grid are
checked instead, and the report says so.

Printed side by side, per size (a masked 1-D add, f32, blocks of 1024): the emulated
run (compiled once, best of a few calls), the element-level race check (compile
included: it is done once per kernel and inputs, then cached), the out-of-bounds check
(the instrumented body with flags, every program) and their ratios to the run.

Run: python benchmarks/whole_array_checks.py [--sizes 65536 1048576 ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp

import pallaslab
from pallaslab._src.core import checking, emulator, jax_adapter, sharing
from tests import corpus

BLOCK = 1024


def masked_add(n: int) -> object:
    """The Triton puzzles' masked vector add over whole arrays, in blocks of BLOCK."""
    return corpus.triton_masked_add(n, BLOCK).fn


def best_of(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(fn())  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def measure(n: int, repeats: int) -> None:
    fn = masked_add(n)
    x = jnp.arange(n, dtype=jnp.float32)
    y = 2 * x
    run = jax.jit(pallaslab.emulate(fn))
    jax.block_until_ready(run(x, y))
    run_s = best_of(lambda: run(x, y), repeats)
    (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(fn)(x, y))
    call, plan = emulator.analyse(site.params, site.in_avals)
    sharing._cache.clear()  # noqa: SLF001 - time the first check, not the cached one
    started = time.perf_counter()
    report = sharing.kernel_races(call, plan, [x, y], "gpu")
    races_s = time.perf_counter() - started
    started = time.perf_counter()
    found = checking.find_out_of_bounds(call, plan, [x, y])
    bounds_s = time.perf_counter() - started
    (shared,) = report.shared.values()
    checked = f"{shared.programs.size}/{call.record.num_programs}"
    print(
        f"{n:>10} {call.record.num_programs:>8} {run_s * 1e3:>9.1f} {races_s * 1e3:>10.1f} "
        f"{races_s / run_s:>7.1f}x {checked:>11} {bounds_s * 1e3:>10.1f} "
        f"{bounds_s / run_s:>7.1f}x  races={len(report.conflicts)} out-of-bounds={len(found)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[65536, 1048576])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"masked 1-D add, blocks of {BLOCK}; MAX_ELEMENT_WORK = {sharing.MAX_ELEMENT_WORK}")
    print(
        f"{'elements':>10} {'programs':>8} {'run ms':>9} {'races ms':>10} {'ratio':>8} "
        f"{'checked':>11} {'bounds ms':>10} {'ratio':>8}"
    )
    for n in args.sizes:
        measure(n, args.repeats)


if __name__ == "__main__":
    main()
