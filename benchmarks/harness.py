"""Cross-checks pallaslab's timing harness against an independent timer on the same callable.

CPU (default): pallaslab's harness (`pallaslab.measure`: AOT compile apart, warm-up,
`block_until_ready`, repetitions until the median is stable) against `timeit` on the
very same compiled callable, for plain XLA programs and a Pallas kernel run as on CPU
(emulated). Both numbers are printed with their difference. (CPU timings say nothing
about GPU/TPU speed; this checks the harness, not the kernel.)

GPU (`--gpu`, on a machine with an NVIDIA GPU, torch and triton): the seed matmul (bf16,
Triton backend, 128x128x32 blocks, 8 warps, 3 stages) at 1024, 2048, 4096 and 8192, a
fused matmul+gelu kernel, and the same computations in `jnp` (XLA), each timed by
pallaslab's harness (L2 flushed between repetitions; CUPTI device time where JAX's
Mosaic GPU extension has it, and wall clock) and by `triton.testing.do_bench` (CUDA
events, its own L2 flush). Prints one markdown table; the goal is agreement within 5%.

Run: python benchmarks/harness.py            # CPU
     python benchmarks/harness.py --gpu      # GPU (optionally --sizes 1024 2048)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from pathlib import Path

if __name__ == "__main__" and "--gpu" not in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # One XLA thread: on a shared machine, a multi-threaded op's time swings with the
    # other tenants' load far more than a single thread's.
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp

from pallaslab._src.bench import harness, live, roofline
from tests import corpus

AGREEMENT = 0.05


# --- CPU: pallaslab vs timeit ---------------------------------------------------


def _timeit_singles(run, reps: int) -> float:
    """timeit on the same callable, one call per sample: the median, ms."""
    timer = timeit.Timer(lambda: jax.block_until_ready(run()))
    return statistics.median(t * 1e3 for t in timer.repeat(repeat=reps, number=1))


def _timeit_loop(run) -> float:
    """timeit's own recipe (autorange loops, best of 5): mean per call, ms."""
    timer = timeit.Timer(lambda: jax.block_until_ready(run()))
    loops, _ = timer.autorange()
    return min(timer.repeat(repeat=5, number=loops)) / loops * 1e3


def cpu_cases():
    key = jax.random.key(0)
    a512 = jax.random.normal(key, (512, 512), jnp.float32)
    v = jax.random.normal(key, (1 << 20,), jnp.float32)
    seed = corpus.seed_matmul(256, 256, 256)
    a256 = jax.random.normal(key, (256, 256), jnp.float32)
    yield "XLA matmul 512^2 f32", jnp.dot, (a512, a512)
    yield "XLA exp(x)+1, 1M f32", lambda x: jnp.exp(x) + 1, (v,)
    yield "Pallas seed matmul 256^3 f32 (emulated)", seed.fn, (a256, a256)


def cpu_main(rounds: int = 21) -> int:
    # The machine may be shared: the two timers take turns, round after round, so drift
    # in the machine's load hits both alike; medians over rounds are compared.
    settings = harness.TimerSettings(budget_s=0.15, precision=0.01, max_reps=500)
    print(
        f"pallaslab harness vs timeit on the same compiled callable ({jax.devices()[0]}, "
        f"{rounds} interleaved rounds)"
    )
    print(f"[{live.CPU_LABEL}]\n")
    print(
        "| callable | pallaslab median (p25..p75, reps/round) | timeit median, same reps | "
        "diff (median over rounds) | diff per round (p25..p75) | timeit best-of-5 loop mean |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for name, fn, args in cpu_cases():
        prepared = harness.prepare(fn, args, {})
        ours, theirs, timings = [], [], []
        for _ in range(rounds):
            timing, _ = harness.measure_prepared(prepared, settings)
            timings.append(timing)
            ours.append(timing.median_ms)
            theirs.append(_timeit_singles(prepared.run, timing.reps))
        mine, other = statistics.median(ours), statistics.median(theirs)
        ratios = sorted(a / b - 1 for a, b in zip(ours, theirs, strict=True))
        loop = _timeit_loop(prepared.run)
        middle = sorted(timings, key=lambda t: t.median_ms)[len(timings) // 2]
        diff = statistics.median(ratios)  # round by round: the two saw the same load
        worst = max(worst, abs(diff))
        print(
            f"| {name} | {mine:.4g} ms ({middle.p25_ms:.4g}..{middle.p75_ms:.4g}, "
            f"{middle.reps}) | {other:.4g} ms | {diff:+.1%} | {ratios[len(ratios) // 4]:+.1%}.."
            f"{ratios[3 * len(ratios) // 4]:+.1%} "
            f"| {loop:.4g} ms |"
        )
    print(
        f"\nlargest difference: {worst:.1%} "
        f"({'within' if worst <= AGREEMENT else 'OUTSIDE'} {AGREEMENT:.0%})"
    )
    return 0 if worst <= AGREEMENT else 1


# --- GPU: pallaslab vs triton.testing.do_bench ------------------------------------


def seed_matmul(block_m=128, block_n=128, block_k=32, *, num_warps=8, num_stages=3, gelu=False):
    """The Pallas matmul tutorial's (Triton backend); with `gelu`, the activation fused."""
    return corpus.make_seed_matmul(
        block_m,
        block_n,
        block_k,
        num_warps=num_warps,
        num_stages=num_stages,
        epilogue=jax.nn.gelu if gelu else None,
    )


def jnp_matmul(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def jnp_matmul_gelu(a, b):
    return jax.nn.gelu(jnp.dot(a, b, preferred_element_type=jnp.float32)).astype(a.dtype)


def gpu_rows(sizes, settings=None):
    """Measures every (size, impl) with both timers; yields one dict per measurement."""
    import torch
    import triton.testing

    chip = roofline.detect_chip(harness.device_name())
    impls = (
        ("pallas matmul", seed_matmul(), jnp_matmul),
        ("jnp matmul", jax.jit(jnp_matmul), None),
        ("pallas matmul+gelu", seed_matmul(gelu=True), jnp_matmul_gelu),
        ("jnp matmul+gelu", jax.jit(jnp_matmul_gelu), None),
    )
    for n in sizes:
        ka, kb = jax.random.split(jax.random.key(n))
        a = jax.random.normal(ka, (n, n), jnp.bfloat16)
        b = jax.random.normal(kb, (n, n), jnp.bfloat16)
        flops = 2.0 * n**3
        for name, fn, ref in impls:
            prepared = harness.prepare(fn, (a, b), {})
            timing, out = harness.measure_prepared(prepared, settings)
            run = prepared.run

            def events_call(run=run):
                torch.cuda.synchronize()  # torch's L2 flush done before JAX starts
                jax.block_until_ready(run())

            do_bench_ms = triton.testing.do_bench(
                events_call, warmup=25, rep=200, return_mode="median"
            )
            wall = (
                statistics.median(timing.wall_samples_ms)
                if timing.wall_samples_ms
                else timing.median_ms
            )
            correct = None
            if ref is not None:
                want = jax.jit(ref)(a, b)
                diff = jnp.abs(out.astype(jnp.float32) - want.astype(jnp.float32))
                correct = bool(jnp.max(diff) <= 2e-2 * jnp.max(jnp.abs(want.astype(jnp.float32))))
            peak = chip.peak_flops("bfloat16")[0] if chip else 0.0
            yield {
                "n": n,
                "impl": name,
                "median_ms": timing.median_ms,
                "p25_ms": timing.p25_ms,
                "p75_ms": timing.p75_ms,
                "wall_ms": wall,
                "do_bench_ms": do_bench_ms,
                "method": timing.method,
                "tflops": flops / (timing.median_ms / 1e3) / 1e12,
                "pct_of_peak": 100 * flops / (timing.median_ms / 1e3) / peak
                if peak
                else float("nan"),
                "compile_ms": timing.compile_ms,
                "correct": correct,
                "notices": timing.notices,
            }


def gpu_main(sizes) -> int:
    device = harness.device_name()
    print(f"pallaslab harness vs triton.testing.do_bench on {device} (jax {jax.__version__})\n")
    print(
        "| n | impl | pallaslab median (p25..p75) | pallaslab wall | do_bench median | "
        "diff (median vs do_bench) | diff (wall vs do_bench) | TFLOP/s | % of peak | correct |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    methods = set()
    notices = set()
    by_size: dict[int, dict[str, float]] = {}
    for row in gpu_rows(sizes):
        d_median = row["median_ms"] / row["do_bench_ms"] - 1
        d_wall = row["wall_ms"] / row["do_bench_ms"] - 1
        worst = max(worst, min(abs(d_median), abs(d_wall)))
        methods.add(row["method"])
        notices.update(row["notices"])
        by_size.setdefault(row["n"], {})[row["impl"]] = row["median_ms"]
        print(
            f"| {row['n']} | {row['impl']} | {row['median_ms']:.4g} ms "
            f"({row['p25_ms']:.4g}..{row['p75_ms']:.4g}) | {row['wall_ms']:.4g} ms | "
            f"{row['do_bench_ms']:.4g} ms | {d_median:+.1%} | {d_wall:+.1%} | "
            f"{row['tflops']:.1f} | {row['pct_of_peak']:.0f}% | {row['correct']} |"
        )
    print()
    for n, times in by_size.items():
        for kind in ("matmul", "matmul+gelu"):
            p, x = times.get(f"pallas {kind}"), times.get(f"jnp {kind}")
            if p and x:
                print(f"n={n} {kind}: Pallas vs XLA {x / p:.2f}x (median times)")
    print(f"\ntiming method: {'; '.join(sorted(methods))}")
    for notice in sorted(notices):
        print(f"notice: {notice}")
    print(
        f"largest disagreement with do_bench: {worst:.1%} "
        f"({'within' if worst <= AGREEMENT else 'OUTSIDE'} {AGREEMENT:.0%})"
    )
    return 0 if worst <= AGREEMENT else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="compare with triton.testing.do_bench")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    options = parser.parse_args()
    if options.gpu:
        if jax.default_backend() != "gpu":
            print("--gpu needs an NVIDIA GPU visible to JAX", file=sys.stderr)
            return 2
        return gpu_main(options.sizes)
    return cpu_main()


if __name__ == "__main__":
    sys.exit(main())
