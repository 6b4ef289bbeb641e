"""A compile-bound tuning sweep on a Ray cluster: one worker against two, and the overhead.

The sweep: 64 configs of a Triton-style Pallas matmul (BLOCK_M x BLOCK_N x BLOCK_K x
num_warps x num_stages), each compiled on a CPU worker by XLA for an H100 (`xla-gpu:H100`:
JAX's CUDA plugin, compile-only, in a fresh process, ptxas included) before a worker times
and checks it (pallaslab's emulator on the CPU). The compile dominates: it is the work
a cluster spreads. Measured in one run on a Ray cluster started here on loopback
(`tests/raycluster.py`): with one one-CPU worker node, then with a second one added;
each after a short warm-up sweep (worker processes import JAX once). Goal on a 2-core
machine: two workers at least 1.6x faster than one.

The overhead per task: the same sweep without the compile stage, its timings cut to one
repetition, on one worker, against the same sweep run here without a cluster: what the
cluster adds per config (tracing and exporting here, serialising, scheduling, sending the
row back), and Ray's own share (each task's submission-to-row time minus the time its
worker spent on it).

Other processes on the machine stretch every wall time: the 1-minute load average is
printed beside each figure (2 CPUs: above 2, the machine is shared), and so is the
machine's own ceiling at that moment: the same compiles in one process, then in two side
by side, without Ray (no cluster can beat what the machine gives two processes).

With `--gpu` (on a GPU machine; `scripts/device-check`'s `cluster` section): a sweep
through a one-node Ray cluster started here, its worker processes on the GPU: each config
compiled on the node's CPUs (`xla-gpu:<its chip>`), then timed and checked on the GPU (one
task at a time: Ray gives it the GPU). Prints each config's row; exits 0 when every config
ran on the GPU (or failed alone, saying why) and the best was found, 1 when the sweep did
not, 2 (skipped) without Ray or a GPU.

Run: python benchmarks/tune_cluster.py [--configs 64] [--skip-compile-bound] [--gpu]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

# The notebook's side runs JAX on the CPU (it traces and exports); with --gpu, the cluster's
# worker processes get the GPU (`gpu_main` starts the node with JAX_PLATFORMS=cuda).
os.environ["JAX_PLATFORMS"] = (
    "cpu" if "--gpu" in sys.argv else os.environ.get("JAX_PLATFORMS", "cpu")
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench.cluster import tuning
from pallaslab._src.core import gpu_toolchain
from tests.raycluster import LocalCluster, cluster_environment

SIZE = 128
GOAL = 1.6
SPACE = {
    "BLOCK_M": [32, 64],
    "BLOCK_N": [32, 64],
    "BLOCK_K": [32, 64],
    "num_warps": [2, 4],
    "num_stages": [1, 2, 3, 4],
}
QUICK = pallaslab.TimerSettings(warmup=1, warmup_s=0.0, min_reps=2, max_reps=3, budget_s=0.1)
ONE_REP = pallaslab.TimerSettings(warmup=0, warmup_s=0.0, min_reps=1, max_reps=1, budget_s=0.0)


def make_matmul(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages):  # noqa: N803
    """A tiled matmul, Triton style (whole arrays, `pl.ds` over K), with Triton's params."""
    from jax.experimental.pallas import triton as pltriton

    def kernel(a_ref, b_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)

        def body(k, acc):
            a = a_ref[pl.ds(i * BLOCK_M, BLOCK_M), pl.ds(k * BLOCK_K, BLOCK_K)]
            b = b_ref[pl.ds(k * BLOCK_K, BLOCK_K), pl.ds(j * BLOCK_N, BLOCK_N)]
            return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

        acc = jax.lax.fori_loop(
            0, SIZE // BLOCK_K, body, jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
        )
        o_ref[pl.ds(i * BLOCK_M, BLOCK_M), pl.ds(j * BLOCK_N, BLOCK_N)] = acc

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((SIZE, SIZE), jnp.float32),
        grid=(SIZE // BLOCK_M, SIZE // BLOCK_N),
        compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
    )


def load() -> float:
    return os.getloadavg()[0]


@dataclasses.dataclass
class Sweep:
    """One timed sweep."""

    wall_s: float
    rows: int
    ok: int
    load: float
    stats: tuning.ClusterStats | None


def picked(space: dict, count: int):
    configs = list(itertools.islice(itertools.product(*space.values()), count))
    names = list(space)

    def build(CONFIG):  # noqa: N803
        return make_matmul(**dict(zip(names, configs[CONFIG], strict=True)))

    return build, {"CONFIG": list(range(len(configs)))}


def run_picked(count, cluster, settings, args, space=SPACE) -> Sweep:
    build, chosen = picked(space, count)
    started_load = load()
    started = time.perf_counter()
    result = pallaslab.tune(
        build, chosen, *args, ref=lambda a, b: a @ b, cache=False, live=False,
        settings=settings, cluster=cluster,
    )  # fmt: skip
    wall = time.perf_counter() - started
    pallas = [r for r in result.rows if r.impl == "pallas"]
    bad = [r for r in pallas if r.status != "ok"]
    for row in bad[:3]:
        print(f"    {row.point}: {row.status}: {row.error.splitlines()[0] if row.error else ''}")
    stats = tuning.last_stats if cluster is not None else None
    return Sweep(wall, len(pallas), len(pallas) - len(bad), (started_load + load()) / 2, stats)


def gpu_count() -> int:
    """The GPUs nvidia-smi lists here (0 without it)."""
    import subprocess

    try:
        listed = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listed.splitlines() if line.startswith("GPU "))


def gpu_main(count: int) -> int:
    """A sweep through a one-node Ray cluster on this GPU machine (see the docstring)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        print("skipped: Ray is not installed here (pip install 'pallaslab[cluster]', or carry "
              "its wheels: scripts/device-wheels --cluster)")  # fmt: skip
        return 2
    import ray

    size = 1024
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (size, size), jnp.float32).astype(jnp.bfloat16)
    b = jax.random.normal(jax.random.fold_in(key, 1), (size, size), jnp.float32).astype(
        jnp.bfloat16
    )
    global SIZE  # noqa: PLW0603 - the matmul's size, for this run
    SIZE = size
    space = {
        "BLOCK_M": [64, 128],
        "BLOCK_N": [64, 128],
        "BLOCK_K": [32, 64],
        "num_warps": [4, 8],
        "num_stages": [3],
    }
    folder = Path(tempfile.mkdtemp(prefix="pallaslab-tune-gpu-"))
    with cluster_environment(folder):
        # The node (and so its workers) sees the GPU; this process stays on the CPU.
        os.environ["JAX_PLATFORMS"] = "cuda"
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        cluster = LocalCluster(folder)
        node = cluster.add_worker(
            None, num_cpus=max(2, (os.cpu_count() or 2) - 1), num_gpus=gpu_count()
        )
        os.environ["JAX_PLATFORMS"] = "cpu"
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            gpus = ray.cluster_resources().get("GPU", 0)
            if not gpus:
                print("skipped: Ray sees no GPU on this machine")
                return 2
            if count < 16:  # 8 configs: one num_warps
                space["num_warps"] = [4]
            started = time.perf_counter()
            result = pallaslab.tune(
                make_matmul, space, a, b,
                ref=lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32),
                cache=False, live=True, cluster=pallaslab.Cluster(cluster.address),
            )  # fmt: skip
            wall = time.perf_counter() - started
        finally:
            ray.shutdown()
            cluster.shutdown()
    del node
    print(f"\n{result.summary()}\n")
    rows = [r for r in result.rows if r.impl == "pallas"]
    on_gpu = [r for r in rows if r.status == "ok" and r.mode == "compiled"]
    compiled = tuning.last_stats
    print(f"chip kinds: {result.chips}; device: {result.plan.device}")
    print(f"{len(on_gpu)}/{len(rows)} configs timed and right on the GPU in {wall:.1f} s; "
          f"timing method: {on_gpu[0].method if on_gpu else '-'}")  # fmt: skip
    if compiled is not None:
        print(f"tasks: {compiled.tasks}, workers busy {compiled.busy_s:.1f} s")
    print("notices: " + ("; ".join(result.notices) or "none"))
    failed_together = result.state != "finished" or result.best is None
    return 1 if failed_together or not on_gpu else 0


def compile_some(start: int, count: int = 4) -> float:
    """Seconds to export and compile `count` configs for xla-gpu:H100 in this process."""
    from pallaslab._src.core import shipping

    a = jnp.ones((SIZE, SIZE), jnp.float32)
    configs = list(itertools.product(*SPACE.values()))[start::2][:count]
    names = list(SPACE)
    started = time.perf_counter()
    for config in configs:
        fn = make_matmul(**dict(zip(names, config, strict=True)))
        shipped = shipping.export_call(fn, (a, a), {}, "cuda", "H100")
        check = shipping.compile_check(shipped, "xla-gpu:H100")
        assert not check.error, check.error
    return time.perf_counter() - started


def machine_parallelism() -> tuple[float, float]:
    """The same compiles without Ray: one process, then two side by side; (ratio, load).

    What the machine gives two workers right now: on a shared machine, the ceiling of
    any cluster's ratio.
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    started_load = load()
    with context.Pool(1) as pool:
        one = pool.map(compile_some, [0, 1])  # 8 compiles, one after another
    with context.Pool(2) as pool:
        started = time.perf_counter()
        pool.map(compile_some, [0, 1])  # the same 8, two processes
        two = time.perf_counter() - started
    return sum(one) / two, (started_load + load()) / 2


def ray_round_trip(ray, count: int = 50) -> float:
    """Seconds from submitting a task that does nothing to holding its result, on average."""

    @ray.remote(num_cpus=1)
    def nothing(value):
        return value

    ray.get(nothing.remote(0))  # a worker started
    started = time.perf_counter()
    for k in range(count):
        ray.get(nothing.remote(k))
    return (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=64, help="configs in the sweep")
    parser.add_argument(
        "--skip-compile-bound", action="store_true", help="only the overhead per task"
    )
    parser.add_argument(
        "--gpu", action="store_true", help="a sweep through a one-node cluster on this GPU"
    )
    options = parser.parse_args()
    if options.gpu:
        raise SystemExit(gpu_main(min(options.configs, 16)))
    import ray

    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (SIZE, SIZE), jnp.float32)
    b = jax.random.normal(jax.random.fold_in(key, 1), (SIZE, SIZE), jnp.float32)
    args = (a, b)
    print(f"{options.configs} configs of a {SIZE}^3 f32 matmul; {os.cpu_count()} CPUs here")
    problem = gpu_toolchain.problem()
    if problem and not options.skip_compile_bound:
        print(f"xla-gpu:H100 cannot compile here ({problem}): compile-bound part skipped")
        options.skip_compile_bound = True
    folder = Path(tempfile.mkdtemp(prefix="pallaslab-tune-cluster-"))
    with cluster_environment(folder):
        started = time.perf_counter()
        cluster = LocalCluster(folder)
        cluster.add_worker(None)
        ray.init(address=cluster.address, log_to_driver=False)
        print(f"cluster: head + 1 one-CPU worker node, up in {time.perf_counter() - started:.1f} s")
        try:
            compiled = pallaslab.Cluster(cluster.address, chips=("cpu",), compile="xla-gpu:H100")
            plain = pallaslab.Cluster(cluster.address, chips=("cpu",), compile=None)
            results = {}
            if not options.skip_compile_bound:
                run_picked(2, compiled, QUICK, args)  # warm-up: worker processes import JAX
                results["one"] = run_picked(options.configs, compiled, QUICK, args)
            # Overhead: the same sweep, no compile stage, one repetition, here and on one worker
            # (each warmed up first), and Ray's round trip of a task that does nothing.
            run_picked(2, None, ONE_REP, args)
            here = run_picked(options.configs, None, ONE_REP, args)
            run_picked(2, plain, ONE_REP, args)
            remote = run_picked(options.configs, plain, ONE_REP, args)
            round_trip = ray_round_trip(ray)
            if not options.skip_compile_bound:
                cluster.add_worker(None)
                run_picked(4, compiled, QUICK, args)  # warm-up of the second node
                results["two"] = run_picked(options.configs, compiled, QUICK, args)
        finally:
            ray.shutdown()
            cluster.shutdown()
    print()
    if results:
        one, two = results["one"], results["two"]
        print(
            f"{'workers':>8} {'wall s':>8} {'s/config':>9} {'ok':>6} {'load':>5} "
            f"{'here s/config':>14}"
        )
        for name, found in (("1", one), ("2", two)):
            here_s = found.stats.driver_s / found.rows if found.stats else float("nan")
            print(
                f"{name:>8} {found.wall_s:8.1f} {found.wall_s / found.rows:9.2f} "
                f"{found.ok:>3}/{found.rows:<2} {found.load:5.1f} {here_s:14.2f}"
            )
        print(
            "  (here s/config: tracing and exporting each config in this process, serial: "
            "configs cannot reach the workers faster)"
        )
        ratio = one.wall_s / two.wall_s
        verdict = "meets" if ratio >= GOAL else "misses"
        print(f"two workers against one: {ratio:.2f}x ({verdict} the {GOAL}x goal)")
        ceiling, ceiling_load = machine_parallelism()
        print(
            f"the machine's own ceiling now: the same compiles in two processes side by side, "
            f"without Ray: {ceiling:.2f}x (load {ceiling_load:.1f}); the cluster got "
            f"{ratio / ceiling:.0%} of it"
        )
        if max(one.load, two.load) > 2.5:
            print("  (the machine was busy: other processes' load stretches these walls)")
    assert remote.stats is not None
    idle = (remote.wall_s - remote.stats.busy_s) / max(remote.stats.tasks, 1)
    print(
        f"overhead per task: Ray's round trip of an empty task {round_trip * 1e3:.1f} ms; "
        f"in the sweep, the one worker idle between configs {idle * 1e3:.0f} ms each (a "
        "config traced and exported here, sent, scheduled, its row back; load "
        f"{remote.load:.1f})"
    )
    print(
        f"the same {remote.rows}-config sweep without compiles: {here.wall_s:.1f} s here, "
        f"{remote.wall_s:.1f} s on one worker ({remote.wall_s / here.wall_s:.2f}x: on a "
        "cluster the tracing here overlaps the worker's timing)"
    )


if __name__ == "__main__":
    main()
