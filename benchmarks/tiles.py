"""Tile maps at scale: a 16384 x 16384 operand in 64 x 64 blocks (65,536 blocks).

Goal (tile-map issue): the tile map builds in under 1 s and the Tiles tab's payload
stays under 2 MiB.

For each case, median of a few repetitions, JAX warm, nothing allocated (the
arguments are shapes):
- map: `TileMap(kernel)` plus what the tab needs of it: read counts of every operand
  (compressed), copies per schedule, revisits;
- payload: the Tiles tab's JSON (tile map included), its size;
- static: the saved-notebook fallback (inline SVG), its size.

Cases: an elementwise add over a 256 x 256 grid (one operand read transposed), and
a k-accumulating matmul over a 256 x 256 x 256 grid (16.7 million programs).

Then the widget's messages at 10**7 programs (a 1-D grid, blocks of 8): the inspector
opened, every tab selected, the whole state sent again (as when a page asks for it)
and a program's accesses asked for, every message measured as the kernel sends it
(UTF-8 JSON); side by side, the Tiles data unsampled (every program's block and
every coverage cell, what the pane used to send: 108.8 MB). Goal (issue 11): the
largest message under 2 MiB.

Run: python benchmarks/tiles.py          (python benchmarks/tiles.py --huge: only the last)
"""

from __future__ import annotations

import json
import math
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
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.views import tilesdata
from pallaslab._src.views.static_page import static_tab

N, B = 16384, 64
REPEATS = 5
GOAL_S = 1.0
GOAL_BYTES = 2 * 1024 * 1024


def add_16384() -> pallaslab.types.Inspection:
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


def matmul_16384() -> pallaslab.types.Inspection:
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


def build_map(inspection: pallaslab.types.Inspection) -> None:
    tiles = TileMap(inspection.kernels[0])
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


HUGE_PROGRAMS = 10**7


def huge_messages() -> None:
    """The inspector's messages at 10**7 programs: sizes and times."""
    import comm

    from pallaslab._src.views.inspector import Inspector

    sizes: list[int] = []

    class RecordingComm(comm.DummyComm):  # type: ignore[misc]
        def publish_msg(self, msg_type: str, data: Any = None, *args: Any, **keys: Any) -> None:
            sizes.append(len(json.dumps(data or {}, ensure_ascii=False).encode("utf-8")))

    comm.create_comm = RecordingComm

    def kernel(x_ref: Any, o_ref: Any) -> None:
        o_ref[...] = x_ref[...] * 2

    spec = jax.ShapeDtypeStruct((HUGE_PROGRAMS * 8,), jnp.float32)
    fn = pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=(HUGE_PROGRAMS,),
        in_specs=[pl.BlockSpec((8,), lambda i: (i,))],
        out_specs=pl.BlockSpec((8,), lambda i: (i,)),
    )
    started = time.perf_counter()
    inspection = pallaslab.inspect(fn, spec)
    traced_s = time.perf_counter() - started
    started = time.perf_counter()
    widget = Inspector(inspection)
    display = widget._repr_mimebundle_()[0]  # with the static page
    opened_s = time.perf_counter() - started
    started = time.perf_counter()
    for tab in [t["id"] for t in widget.tabs]:
        widget.selected = tab
    widget.send_state()
    last = {"kind": "accesses", "kernel": 0, "program": [HUGE_PROGRAMS - 1]}
    # As the front end's message arrives (the reply is measured like every message).
    widget._on_request(widget, {"tab": "tiles", "id": 1, "body": last}, [])  # noqa: SLF001
    tabs_s = time.perf_counter() - started
    started = time.perf_counter()
    tilesdata.forget(inspection)
    pane = tilesdata.payload(inspection)
    pane_s = time.perf_counter() - started
    tiles = inspection.tiles(0)
    unsampled = tilesdata.kernel_json(tiles, budget=math.inf)  # type: ignore[arg-type]
    whole = len(json.dumps(unsampled).encode())
    largest = max([*sizes, len(json.dumps(display).encode())])
    stride = pane["kernels"][0]["stride"]
    print(f"\n1-D grid of {HUGE_PROGRAMS:,} programs, blocks of 8 (no run):")
    print(f"  trace                 {traced_s:8.2f} s")
    print(f"  inspector displayed   {opened_s:8.2f} s")
    print(f"  every tab + state     {tabs_s:8.2f} s   (the Tiles data computed here, then cached)")
    print(f"  Tiles pane, uncached  {pane_s:8.2f} s   sampled every {stride[0]}th program")
    verdict = "ok" if largest < GOAL_BYTES else "OVER GOAL"
    print(
        f"  largest message       {largest / 2**20:8.2f} MiB of {len(sizes) + 1} "
        f"(goal {GOAL_BYTES / 2**20:.0f} MiB): {verdict}"
    )
    print(
        f"  Tiles data unsampled  {whole / 2**20:8.2f} MiB = {whole / largest:.0f}x the "
        "largest message sent"
    )


def main() -> None:
    jax.numpy.ones(8).block_until_ready()
    if "--huge" in sys.argv:
        huge_messages()
        return
    print(f"jax {jax.__version__} on {jax.default_backend()}, median of {REPEATS}")
    for name, build in (
        ("add 16384^2, 64^2 blocks, grid 256x256", add_16384),
        ("matmul 16384^3, 64^3 blocks, grid 256x256x256", matmul_16384),
    ):
        inspection = build()
        kernel = inspection.kernels[0]
        map_s, _ = timed(lambda i=inspection: build_map(i))

        def fresh_payload(i: pallaslab.types.Inspection = inspection) -> dict[str, Any]:
            tilesdata.forget(i)  # the tab's data is cached per inspection
            return tilesdata.payload(i)

        payload_s, payload = timed(fresh_payload)
        payload_bytes = len(json.dumps(payload).encode())
        static_s, static = timed(
            lambda i=inspection: (tilesdata.forget(i), static_tab(i, "tiles"))[1]
        )
        tiles = TileMap(kernel)
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
    huge_messages()


if __name__ == "__main__":
    main()
