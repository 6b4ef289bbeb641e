"""Mosaic GPU plans at scale: following a kernel's body for every CTA and warpgroup.

For each kernel (traced from shapes, nothing allocated), one run each, JAX warm:
- trace: `pallaslab.inspect` (for scale);
- plan: `inspection.plan()`: the body walked over the grid (copies, products,
  pipelines), and the SMEM budget;
- tab: the Tiles tab's payload (the copy map, the Mosaic GPU part) and its size.

Cases: the TMA + wgmma matmul of `tests/mosaic_gpu_pipelines.py` at 8192 x 8192 x 8192
(64 x 64 CTAs, 128 pipeline steps each: 524,288 copies of A), its persistent form on
132 CTAs (4,096 tiles, 128 steps each), and JAX's own Hopper matmul (warp-specialized,
clusters of 2, persistent) at 8192 cubed, traced for an H100. No goal yet: a figure
(the walker stops at 500,000 equations and says so).

Run: python benchmarks/mosaic_gpu_plans.py
"""

from __future__ import annotations

import json
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

import pallaslab
from pallaslab._src.views import tilesdata
from tests import mosaic_gpu_pipelines as kernels

N = 8192


def _timed(work: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    found = work()
    return found, time.perf_counter() - start


def _hopper() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hopper

    config = hopper.TuningConfig(
        tile_m=128,
        tile_n=128,
        tile_k=64,
        max_concurrent_steps=4,
        cluster_dimension=hopper.MatmulDimension.N,
    )
    a = jax.ShapeDtypeStruct((N, N), jnp.float16)
    return (lambda x, y: hopper.matmul(x, y, None, config)), (a, a)


def _h100() -> Any:
    sharding = jax.sharding
    device = sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", platform="gpu", num_cores=132
    )
    return sharding.use_abstract_mesh(sharding.AbstractMesh((), (), abstract_device=device))


def main() -> None:
    cases = {
        f"TMA + wgmma matmul {N}^3, 64 x 64 CTAs": lambda: kernels.tma_wgmma_matmul(N, N, N),
        f"persistent matmul {N}^3 on 132 CTAs": lambda: kernels.persistent_matmul(N, N, N),
        f"JAX's Hopper matmul {N}^3 (H100)": _hopper,
    }
    print(f"{'kernel':<44} {'trace s':>8} {'plan s':>8} {'tab s':>7} {'tab KiB':>8}  figures")
    for name, build in cases.items():
        fn, args = build()
        with _h100():
            inspection, traced = _timed(lambda fn=fn, args=args: pallaslab.inspect(fn, *args))
            plan, planned = _timed(inspection.plan)
            budget = inspection.smem()
            payload, tabbed = _timed(lambda inspection=inspection: tilesdata.payload(inspection))
        size = len(json.dumps(payload)) / 1024
        copies = sum(c.copies for c in plan.copies)
        figures = (
            f"{plan.ctas} CTAs, {copies:,} copies, {plan.mma_flops / 1e12:.2f} TFLOP, "
            f"SMEM {budget.total:,} B" + ("" if plan.exact else " (partial)")
        )
        print(f"{name:<44} {traced:8.2f} {planned:8.2f} {tabbed:7.2f} {size:8.0f}  {figures}")


if __name__ == "__main__":
    main()
