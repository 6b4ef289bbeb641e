"""Tile maps at scale: a 16384 x 16384 operand in 64 x 64 blocks (65,536 blocks).

Goal (tile-map issue): the tile map builds in under 1 s and the Tiles tab's payload
stays under 2 MiB.

For each case, median of a few repetitions, JAX warm, nothing allocated (the
arguments are shapes):
- map: `kernel.tiles()` plus what the tab needs of it: read counts of every operand
  (compressed), copies per schedule, revisits;
- payload: the Tiles tab's JSON (tile map included), its size;
- static: the saved-notebook fallback (inline SVG), its size.

Cases: an elementwise add over a 256 x 256 grid (one operand read transposed), and
a k-accumulating matmul over a 256 x 256 x 256 grid (16.7 million programs).

Run: python benchmarks/tiles.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.geometry import merit
from pallaslab._src.views import tilesdata
from pallaslab._src.views.tabs import tiles as tiles_tab

N, B = 16384, 64
REPEATS = 5
GOAL_S = 1.0
GOAL_BYTES = 2 * 1024 * 1024


def add_16384() -> pallaslab.Inspection:
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...].T

    spec = jax.ShapeDtypeStruct((N, N), jnp.float32)
    fn = pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=(N // B, N // B),
        in_specs=[
            pl.BlockSpec((B, B), lambda i, j: (i, j)),
            pl.BlockSpec((B, B), lambda i, j: (j, i)),
        ],
        out_specs=pl.BlockSpec((B, B), lambda i, j: (i, j)),
    )
    return pallaslab.inspect(fn, spec, spec)


def matmul_16384() -> pallaslab.Inspection:
    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    spec = jax.ShapeDtypeStruct((N, N), jnp.float32)
    fn = pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=(N // B, N // B, N // B),
        in_specs=[
            pl.BlockSpec((B, B), lambda i, j, k: (i, k)),
            pl.BlockSpec((B, B), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((B, B), lambda i, j, k: (i, j)),
    )
    return pallaslab.inspect(fn, spec, spec)


def build_map(inspection: pallaslab.Inspection) -> None:
    tiles = inspection.kernels[0].tiles()
    for k in range(len(tiles.operands)):
        tiles.coverage(k)
        tiles.visits(k)
    for schedule in ("tpu", "gpu"):
        merit.kernel_merit(tiles, schedule)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    seconds = []
    result = None
    for _ in range(REPEATS):
        started = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def main() -> None:
    jax.numpy.ones(8).block_until_ready()
    print(f"jax {jax.__version__} on {jax.default_backend()}, median of {REPEATS}")
    for name, build in (
        ("add 16384^2, 64^2 blocks, grid 256x256", add_16384),
        ("matmul 16384^3, 64^3 blocks, grid 256x256x256", matmul_16384),
    ):
        inspection = build()
        kernel = inspection.kernels[0]
        map_s, _ = timed(lambda i=inspection: build_map(i))
        payload_s, payload = timed(lambda i=inspection: tilesdata.payload(i))
        payload_bytes = len(json.dumps(payload).encode())
        static_s, static = timed(lambda i=inspection: tiles_tab.static_html(i))
        tiles = kernel.tiles()
        figures = merit.kernel_merit(tiles)
        print(f"\n{name}: {kernel.num_programs:,} programs, schedule {tiles.schedule}")
        verdict = "ok" if map_s < GOAL_S else "OVER GOAL"
        print(f"  tile map       {map_s * 1e3:8.1f} ms   goal {GOAL_S * 1e3:.0f} ms: {verdict}")
        verdict = "ok" if payload_bytes < GOAL_BYTES else "OVER GOAL"
        print(
            f"  tab payload    {payload_s * 1e3:8.1f} ms   {payload_bytes / 1024:8.1f} KiB   "
            f"goal {GOAL_BYTES // 1024} KiB: {verdict}"
        )
        print(f"  static HTML    {static_s * 1e3:8.1f} ms   {len(static) / 1024:8.1f} KiB")
        print(
            f"  HBM traffic {figures.hbm_bytes / 2**30:.2f} GiB = {figures.traffic_ratio:.1f}x "
            f"the minimum; working set {figures.working_set_bytes / 1024:.0f} KiB per program"
        )


if __name__ == "__main__":
    main()
