"""JAX's Mosaic GPU interpreter on the tests' Mosaic GPU kernels, beside the Triton emulator.

How long a run takes on a CPU when a kernel is written for Mosaic GPU (JAX's
interpreter simulates its threads, shared memory, barriers and TMA copies) against the
same computation written in the Triton style (pallaslab's emulator batches the
programs). A figure, no goal yet: the interpreter is a faithful simulator, not a fast
one. Kernels: `tests/mosaic_gpu_corpus.py`'s, and for each a Triton-style
`pallas_call` computing the same thing on the same arrays (blocked, with Triton
compiler params). Each run is `inspection.run()` (compile included, `first`) and once
more (`again`: pallaslab's compile cache holds the program); both are checked against
NumPy. The tcgen05 kernel is left out where the interpreter cannot run it.

Run: python benchmarks/mosaic_gpu_interpret.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

import pallaslab
from tests import mosaic_gpu_corpus as corpus

TRITON = pltriton.CompilerParams(num_warps=4, num_stages=2)


def _elementwise(op: Callable[..., Any], block: tuple[int, int]) -> Callable[..., Any]:
    """A Triton-style blocked elementwise kernel: `op` of the inputs' blocks."""

    def kernel(*refs):
        *ins, out = refs
        out[...] = op(*(r[...] for r in ins))

    def call(*args):
        rows, cols = args[0].shape
        spec = pl.BlockSpec(block, lambda i, j: (i, j))
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(args[0].shape, args[0].dtype),
            grid=(rows // block[0], cols // block[1]),
            in_specs=[spec] * len(args),
            out_specs=spec,
            compiler_params=TRITON,
        )(*args)

    return call


def triton_matmul(a, b, bm: int = corpus.TILE_M, bn: int = corpus.TILE_N, bk: int = 64):
    """A Triton-style matmul: output blocks, a loop over K tiles, f32 accumulation."""
    m, k = a.shape
    _, n = b.shape

    def kernel(a_ref, b_ref, o_ref):
        def step(s, acc):
            window = pl.ds(s * bk, bk)
            return acc + pl.dot(a_ref[:, window], b_ref[window, :]).astype(jnp.float32)

        o_ref[...] = jax.lax.fori_loop(0, k // bk, step, jnp.zeros((bm, bn), jnp.float32))

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        compiler_params=TRITON,
    )(a, b)


def triton_matmul_f16_out(a, b):
    return triton_matmul(a, b, bm=128, bn=128, bk=64).astype(a.dtype)


# The Triton-style equivalent of each corpus kernel.
EQUIVALENTS: dict[str, Callable[..., Any]] = {
    "persistent_double": _elementwise(lambda x: x * 2, (corpus.ROWS, 128)),
    "warp_specialized_add": _elementwise(lambda x, y: x + y, (corpus.BLOCK, corpus.BLOCK)),
    "cluster_scale": _elementwise(lambda x: x * 3, (2 * corpus.ROWS, 128)),
    "wgmma_matmul": triton_matmul,
    "tcgen05_matmul": triton_matmul_f16_out,
}


def timed(fn: Callable[..., Any], args: tuple[Any, ...], reference: Any, rtol: float):
    """(first run s, second run s, mode) of `fn` on `args`, checked against NumPy."""
    inspection = pallaslab.inspect(fn, *args)
    times, mode = [], ""
    for _ in range(2):
        started = time.perf_counter()
        result = inspection.run()
        times.append(time.perf_counter() - started)
        mode = result.mode
        np.testing.assert_allclose(
            np.asarray(result.values[0], np.float32),
            np.asarray(reference, np.float32),
            rtol=rtol,
            atol=rtol,
        )
    return times[0], times[1], mode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", help="corpus kernels to time (default: all)")
    options = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; seconds per run (CPU)")
    header = (
        f"{'kernel':24} {'interpreter first':>18} {'again':>8} {'emulator first':>15} "
        f"{'again':>8} {'ratio (again)':>14}"
    )
    print(header)
    print("-" * len(header))
    for case in corpus.cases():
        if options.only and case.name not in options.only:
            continue
        if not case.interpretable():
            print(f"{case.name:24}   not run: jax {jax.__version__}'s interpreter cannot run it")
            continue
        reference = case.reference(*case.args)
        interp = timed(case.fn, case.args, reference, case.rtol)
        emul = timed(EQUIVALENTS[case.name], case.args, reference, max(case.rtol, 1e-2))
        assert interp[2] == "mosaic-gpu-interpret", interp[2]
        print(
            f"{case.name:24} {interp[0]:>18.2f} {interp[1]:>8.2f} {emul[0]:>15.2f} "
            f"{emul[1]:>8.2f} {interp[1] / max(emul[1], 1e-9):>13.0f}x  ({emul[2]})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
