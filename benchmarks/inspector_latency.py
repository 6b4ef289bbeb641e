"""Time from "cell executed" to "inspector ready", for the vector add and the seed matmul.

Goal (core issue): under 0.5 s for both, on CPU with JAX warm.

Two measurements, side by side in one run:
- through the magic: the time a `%%kernel CALL` cell takes beyond running the same
  cell body as plain Python (so: trace, run in interpret mode, compare, build and
  display the inspector);
- by phase, through the Python API, with fresh kernel objects each repetition (as a
  re-run cell makes them, so JAX's caches do not hide the compile).

Run: python benchmarks/inspector_latency.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

import pallaslab
from pallaslab._src.core import running, tracing
from pallaslab._src.views.inspector import Inspector
from tests import corpus

REPEATS = 5
GOAL_S = 0.5

CELLS = {
    "vector add": (
        "add(x, y)",
        """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
                     grid=(8,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
                     out_specs=pl.BlockSpec((128,), lambda i: (i,)))
x = jnp.arange(1024.0); y = 2 * x
""",
    ),
    "seed matmul": (
        "matmul(a, b)",
        """
import functools, jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32

def _matmul_kernel(a_ref, b_ref, c_ref, *, num_k_tiles):
    acc = jnp.zeros((BLOCK_M, BLOCK_N), dtype=jnp.float32)
    def body(t, acc):
        k_idx = pl.dslice(t * BLOCK_K, BLOCK_K)
        a_tile = plgpu.load(a_ref.at[:, k_idx])
        b_tile = plgpu.load(b_ref.at[k_idx, :])
        return acc + jnp.dot(a_tile, b_tile).astype(jnp.float32)
    acc = jax.lax.fori_loop(0, num_k_tiles, body, acc)
    plgpu.store(c_ref, acc.astype(c_ref.dtype))

@jax.jit
def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    return pl.pallas_call(
        functools.partial(_matmul_kernel, num_k_tiles=pl.cdiv(K, BLOCK_K)),
        out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
        grid=(pl.cdiv(M, BLOCK_M), pl.cdiv(N, BLOCK_N)),
        in_specs=[pl.BlockSpec((BLOCK_M, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, BLOCK_N), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
        compiler_params=plgpu.CompilerParams(num_warps=8, num_stages=3),
    )(a, b)

key = jax.random.key(0)
a = jax.random.normal(key, (1024, 1024), dtype=jnp.bfloat16)
b = jax.random.normal(key, (1024, 1024), dtype=jnp.bfloat16)
""",
    ),
}


def _time_cell(shell, source: str) -> float:
    with capture_output():
        started = time.perf_counter()
        result = shell.run_cell(source)
        elapsed = time.perf_counter() - started
    if not result.success:
        raise SystemExit(f"cell failed: {result.error_in_exec!r}")
    return elapsed


def through_the_magic() -> dict[str, float]:
    shell = start_ipython()
    shell.run_line_magic("load_ext", "pallaslab")
    medians = {}
    for name, (call, body) in CELLS.items():
        _time_cell(shell, body)  # warm imports
        extra = []
        for _ in range(REPEATS):
            plain = _time_cell(shell, body)
            magic = _time_cell(shell, f"%%kernel {call}\n{body}")
            extra.append(max(0.0, magic - plain))
        medians[name] = statistics.median(extra)
    return medians


def by_phase() -> dict[str, dict[str, float]]:
    builds = {"vector add": corpus.blocked_add, "seed matmul": corpus.seed_matmul}
    phases: dict[str, dict[str, list[float]]] = {}
    for name, build in builds.items():
        rows = phases.setdefault(name, {})
        for _ in range(REPEATS):
            case = build()
            args = running.example_arrays(case.args)
            t0 = time.perf_counter()
            program = tracing.trace_program(case.fn, args, {})
            inspection = pallaslab.Inspection.from_program(program)
            t1 = time.perf_counter()
            result = running.run_program(program, args, {}, ref=case.reference)
            t2 = time.perf_counter()
            Inspector(inspection.with_result(result))._repr_mimebundle_()
            t3 = time.perf_counter()
            for phase, seconds in (("trace", t1 - t0), ("run", t2 - t1), ("view", t3 - t2)):
                rows.setdefault(phase, []).append(seconds)
    return {
        name: {phase: statistics.median(v) for phase, v in rows.items()}
        for name, rows in phases.items()
    }


def main() -> None:
    jax.numpy.ones(8).block_until_ready()
    print(f"jax {jax.__version__} on {jax.default_backend()}, median of {REPEATS}")
    print("\nThrough %%kernel (time beyond the plain cell):")
    for name, seconds in through_the_magic().items():
        verdict = "ok" if seconds < GOAL_S else "OVER GOAL"
        print(f"  {name:12s} {seconds * 1e3:7.1f} ms   goal {GOAL_S * 1e3:.0f} ms: {verdict}")
    print("\nBy phase (Python API, fresh kernels each time):")
    for name, phases in by_phase().items():
        cells = "  ".join(f"{p} {s * 1e3:6.1f} ms" for p, s in phases.items())
        total = sum(phases.values())
        print(f"  {name:12s} {cells}  total {total * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
