"""Peak memory of a `%%kernel` cell against the plain jitted call, and what a re-run keeps.

Goals (issue 20, item 9): the magic's peak at most 1.5x the plain jitted call's (the
same computation in jnp: the input and the output), with `--ref` at most 2x;
re-running the cell keeps nothing of the earlier run alive.

Each measurement runs in a fresh process (so one's freed memory cannot hide the
next's): JAX (and for the magic, IPython with pallaslab) is imported, then the peak
resident memory of the step is taken above the memory before it (Linux's own record
of the peak, VmHWM, reset before the step). The step makes the input inside the
measurement (as a cell would): a float32 array of SIZE MiB, made by one fused XLA loop
(no temporaries), and a kernel that writes an output of the same size
(`o = x * 2 + 1`, 256-row blocks):

- jnp: `jax.jit(lambda a: a * 2 + 1)(x)`: XLA's own, the input and the output (the
  baseline the ratios are against);
- jit: `jax.jit(call)(x)` with the kernel in Pallas' interpreter (the plain call of
  the kernel on a CPU);
- magic: `%%kernel call(x)` (traced, run in the emulator, checked, inspector shown);
- magic --ref: `%%kernel call(x) --ref "lambda a: a * 2 + 1"` (compared as well);
- re-run: the magic cell run 3 times, the resident memory after each (gc'd): what
  the earlier runs' inspectors keep.

Run: python benchmarks/magic_memory.py [--size MIB] (default 256; --size 1024 for 1 GiB)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GOAL_MAGIC = 1.5
GOAL_REF = 2.0

_CHILD = textwrap.dedent(
    """
    import gc, json, os, sys
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, {root!r})
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    MODE, MIB = {mode!r}, {mib}

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def high_water():  # Linux's own record of the peak (VmHWM) since reset_peak()
        with open("/proc/self/status") as f:
            line = next(l for l in f if l.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    rows = MIB * 2**20 // 4 // 1024
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + 1.0
    spec = pl.BlockSpec((256, 1024), lambda i: (i, 0))
    def make_call(interpret):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((rows, 1024), jnp.float32),
                              grid=(rows // 256,), in_specs=[spec], out_specs=spec,
                              interpret=interpret)
    # Made by one fused XLA loop: the input's own bytes, no temporaries.
    make_input = jax.jit(
        lambda scale: jnp.arange(rows * 1024, dtype=jnp.float32).reshape(rows, 1024) * scale
    )
    make_input.lower(1.0).compile()
    if MODE not in ("jit", "jnp"):
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "pallaslab")
        ip.user_ns.update(make_call=make_call, make_input=make_input)
    gc.collect()
    base = rss()
    reset_peak()
    after = []
    if MODE == "jit":
        x = make_input(1e-6)
        out = jax.block_until_ready(jax.jit(make_call(True))(x))
    elif MODE == "jnp":
        x = make_input(1e-6)
        out = jax.block_until_ready(jax.jit(lambda a: a * 2.0 + 1.0)(x))
    else:
        ref = ' --ref "lambda a: a * 2.0 + 1.0"' if MODE == "ref" else ""
        cell = "%%kernel call(x)" + ref + "\\ncall = make_call(False)\\nx = make_input(1e-6)\\n"
        for _ in range(3 if MODE == "rerun" else 1):
            result = ip.run_cell(cell)
            assert result.success, result.error_in_exec
            gc.collect()
            after.append(rss() - base)
    print(json.dumps({{"peak": high_water() - base, "after": after}}))
    """
)


def measure(mode: str, mib: int) -> dict[str, object]:
    """One step's peak above the memory before it, in a fresh process."""
    code = _CHILD.format(root=str(ROOT), mode=mode, mib=mib)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-3000:]}")
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="input (and output) size in MiB")
    options = parser.parse_args()
    mib = options.size
    print(f"input and output: float32, {mib} MiB each; peak resident memory above the start")
    plain = measure("jnp", mib)
    jit = measure("jit", mib)
    magic = measure("magic", mib)
    ref = measure("ref", mib)
    rerun = measure("rerun", mib)
    base = float(plain["peak"])  # type: ignore[arg-type]

    def row(name: str, found: dict[str, object], goal: float | None) -> None:
        peak = float(found["peak"])  # type: ignore[arg-type]
        ratio = peak / base if base else float("nan")
        verdict = (
            "" if goal is None else f"  goal <= {goal}x: {'met' if ratio <= goal else 'NOT met'}"
        )
        print(f"{name:<24} {peak / 2**20:8.0f} MiB  {ratio:5.2f}x{verdict}")

    row("jax.jit, the same in jnp", plain, None)
    row("jax.jit, interpret=True", jit, None)
    row("%%kernel", magic, GOAL_MAGIC)
    row("%%kernel --ref", ref, GOAL_REF)
    kept = [int(v) / 2**20 for v in rerun["after"]]  # type: ignore[attr-defined]
    print(
        "re-run 3 times, resident after each: "
        + ", ".join(f"{v:.0f} MiB" for v in kept)
        + f"  (grew {kept[-1] - kept[0]:.0f} MiB from the first; goal: about 0)"
    )


if __name__ == "__main__":
    main()
