"""Time to lower the seed matmul (bf16, 1024^3) for each target: first, cold and cached.

Goals (IR explorer issue), on CPU: Triton IR and Mosaic modules under 0.5 s, PTX
under 3 s, a cached lowering under 10 ms.

The seed matmul (the Pallas matmul tutorial's: 128x128x32 tiles, 8 warps, 3 stages, Triton
loads) is lowered for `triton` and `ptx:sm_90`. It has no Mosaic lowering (Triton-only loads),
so the same product goes to Mosaic through JAX's own kernels: `jax.experimental.pallas.ops.tpu
.matmul` (128x128 blocks) for `mosaic-tpu:v5e` and `tpu-compile:v5e`, and
`ops.gpu.hopper_matmul_mgpu` (128x128x64 tiles, traced for an H100) for `mosaic-gpu`.

`xla-gpu:H100` (XLA's own compile with JAX's CUDA plugin, compile-only, in a worker
process: export, compile, ptxas and nvdisasm) is timed for the seed matmul (XLA's
Triton) and for JAX's Mosaic GPU attention (`ops.gpu.attention_mgpu`, TMA + wgmma,
f16, 1x2048x4x128, 64x128 blocks). Goal: cold under 3 s, cached under 10 ms. Without
`pallaslab[gpu-compile]` those rows say what to install.

Columns:
- first: the first lowering in this process (imports and JAX's first-use costs in);
- cold: median over fresh inspections (new kernel objects, nothing cached);
- cached: asking again for the same kernel and target;
- cpu: CPU seconds of a cold lowering, this process and its workers (ptxas, the XLA
  compile worker ...) together: on a shared machine wall times grow with the load,
  this does not;
- load: the 1-minute load average while measuring (2 CPUs: above 2, wall times stretch).

Run: python benchmarks/lowering.py [TARGET-PREFIX ...]   (e.g. `xla-gpu`: those rows only)
"""

from __future__ import annotations

import functools
import os
import resource
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
from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul

import pallaslab
from pallaslab._src.core import gpu_toolchain
from tests import corpus

SIZE = 1024
BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32
NUM_WARPS, NUM_STAGES = 8, 3
REPEATS = 3
GOALS = {
    "triton": 0.5,
    "mosaic-gpu": 0.5,
    "mosaic-tpu:v5e": 0.5,
    "ptx:sm_90": 3.0,
    "xla-gpu:H100": 3.0,
    "xla-gpu:H100 attention": 3.0,
}
CACHED_GOAL_MS = 10.0


def seed_matmul() -> Callable[..., Any]:
    """The Pallas matmul tutorial's kernel, made afresh (new objects: nothing in JAX's caches)."""
    return corpus.make_seed_matmul(
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES
    )


def _operands() -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct((SIZE, SIZE), jnp.bfloat16)] * 2


def inspect_seed() -> pallaslab.types.Inspection:
    return pallaslab.inspect(seed_matmul(), *_operands())


def inspect_tpu() -> pallaslab.types.Inspection:
    fn = functools.partial(tpu_matmul.matmul, block_shape=(128, 128))
    return pallaslab.inspect(fn, *_operands())


def inspect_mosaic_gpu() -> pallaslab.types.Inspection:
    # The Hopper kernel sizes its grid by the GPU's SMs: trace it for an H100.
    device = jax.sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh(
        (1,), ("x",), (jax.sharding.AxisType.Explicit,), abstract_device=device
    )
    config = hopper_matmul_mgpu.TuningConfig(
        tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=4
    )
    fn = functools.partial(hopper_matmul_mgpu.matmul, c=None, config=config)
    with jax.sharding.use_abstract_mesh(mesh):
        return pallaslab.inspect(fn, *_operands())


def inspect_attention() -> pallaslab.types.Inspection:
    # Imported here: tracing JAX's Mosaic GPU attention asks the CUDA runtime its version.
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    config = attention_mgpu.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2)
    qkv = jax.ShapeDtypeStruct((1, 2048, 4, 128), jnp.float16)
    attention = functools.partial(attention_mgpu.attention, config=config)
    return pallaslab.inspect(attention, qkv, qkv, qkv)


# Row label ("target" or "target what") -> the inspection to lower for that target.
CASES: dict[str, Callable[[], pallaslab.types.Inspection]] = {
    "triton": inspect_seed,
    "ptx:sm_90": inspect_seed,
    "mosaic-gpu": inspect_mosaic_gpu,
    "mosaic-tpu:v5e": inspect_tpu,
    "tpu-compile:v5e": inspect_tpu,
    "xla-gpu:H100": inspect_seed,
    "xla-gpu:H100 attention": inspect_attention,
}


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (workers, ptxas ...)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(label: str, make: Callable[[], pallaslab.types.Inspection]) -> dict[str, Any]:
    target = label.split(maxsplit=1)[0]
    inspection = make()
    first, lowered = _time(lambda: inspection.lower(target))
    if not lowered.ok:
        raise SystemExit(f"{target}: {lowered.error}")
    cached = min(_time(lambda: inspection.lower(target))[0] for _ in range(5))
    colds, cpus, loads = [], [], []
    for _ in range(REPEATS):
        fresh = make()
        cpu = _cpu_seconds()
        colds.append(_time(lambda fresh=fresh: fresh.lower(target))[0])
        cpus.append(_cpu_seconds() - cpu)
        loads.append(os.getloadavg()[0])
    return {
        "first": first,
        "cold": statistics.median(colds),
        "cpu": statistics.median(cpus),
        "load": statistics.median(loads),
        "cached_ms": cached * 1000,
        "lines": len(lowered.lines),
        "mapped": len(lowered.source_map),
    }


def main() -> None:
    print(
        f"jax {jax.__version__}, {os.cpu_count()} CPUs; bf16 {SIZE}^3 matmul; median of {REPEATS}"
    )
    missing = gpu_toolchain.problem()
    wanted = tuple(sys.argv[1:]) or ("",)
    cases = {
        k: v
        for k, v in CASES.items()
        if k.startswith(wanted) and not (missing and k.startswith("xla-gpu"))
    }
    rows = {label: measure(label, make) for label, make in cases.items()}
    header = (
        f"{'target':<24} {'first':>8} {'cold':>8} {'cpu':>7} {'load':>5} {'cached':>9} "
        f"{'lines':>6}  goal"
    )
    print(header)
    print("-" * len(header))
    for target, row in rows.items():
        goal = GOALS.get(target)
        verdict = (
            "" if goal is None else f"cold < {goal} s {'ok' if row['cold'] < goal else 'MISSED'}"
        )
        cached_ok = "ok" if row["cached_ms"] < CACHED_GOAL_MS else "MISSED"
        print(
            f"{target:<24} {row['first']:>7.2f}s {row['cold']:>7.2f}s {row['cpu']:>6.2f}s "
            f"{row['load']:>5.1f} {row['cached_ms']:>7.3f}ms {row['lines']:>6}  {verdict}; "
            f"cached {cached_ok}"
        )
    if missing:
        print(f"xla-gpu rows left out: {missing}")


if __name__ == "__main__":
    main()
