"""`pl.debug_print` at scale: the emulator against Pallas' interpreter, side by side.

Goal (issue 20, item 7): at 10^5 programs each printing a line, the emulator no
slower than `interpret=True` (it took 126 s against the interpreter's 8.9 s before:
JAX batches a print by unrolling it once per program).

The kernel prints its program id and a value, once per program (8 float32 elements a
block). Each mode is timed from the call to the results ready and every line printed
(compile included: a print-heavy kernel is run once, not timed in a loop), its output
captured and counted; both must print the same lines.

Run: python benchmarks/debug_print.py [--programs N] (default 100000)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import jax_adapter


def kernel(x_ref, o_ref):
    pl.debug_print("program {} value {}", pl.program_id(0), x_ref[0])
    o_ref[...] = x_ref[...] * 2.0


def make_call(programs: int, interpret: bool):
    spec = pl.BlockSpec((8,), lambda i: (i,))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8 * programs,), jnp.float32),
        grid=(programs,),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )


def timed(fn, x) -> tuple[float, list[str]]:
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        jax.block_until_ready(fn(x))
        jax.effects_barrier()
    return time.perf_counter() - started, out.getvalue().splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100_000)
    programs = parser.parse_args().programs
    x = jnp.arange(8 * programs, dtype=jnp.float32)
    emulated_s, emulated = timed(pallaslab.emulate(make_call(programs, False)), x)
    with jax_adapter.auto_interpret(False):  # Pallas' own, as without pallaslab
        interpreted_s, interpreted = timed(jax.jit(make_call(programs, True)), x)
    same = sorted(emulated) == sorted(interpreted)
    print(f"{programs:,} programs, one debug_print each (compile included)")
    print(f"{'':<28}{'seconds':>10}{'lines':>10}")
    print(f"{'emulator (pallaslab)':<28}{emulated_s:>10.2f}{len(emulated):>10,}")
    print(f"{'interpret=True (Pallas)':<28}{interpreted_s:>10.2f}{len(interpreted):>10,}")
    ratio = interpreted_s / emulated_s if emulated_s else float("inf")
    verdict = "met" if emulated_s <= interpreted_s else "NOT met"
    print(f"emulator {ratio:.1f}x faster; goal (no slower): {verdict}; same lines: {same}")


if __name__ == "__main__":
    main()
