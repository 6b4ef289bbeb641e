"""Predicted GPU resources beside what the GPU's own compile of the same kernel uses.

Predicted: pallaslab's `ptx:sm_XX` target for the device's architecture (the `triton`
package compiling the Triton IR that JAX's Pallas emits: registers per thread, spills,
shared memory per block, theoretical occupancy on that GPU by CUDA's rules).
On the device: the kernel as XLA compiled and launched it, read by Nsight Compute
(`ncu`: registers per thread, static + dynamic shared memory, theoretical occupancy,
what limits it); without ncu, by `ptxas -v` on the PTX XLA wrote (`--xla_dump_to`),
which gives registers and spills but not the dynamic shared memory of the launch.

Kernels: the seed matmul, the fused matmul+gelu (bf16, 128x128x32, 8 warps, 3 stages)
and the course's flash attention (Triton backend).

Run: python benchmarks/gpu_resources.py             # on a GPU
     python benchmarks/gpu_resources.py --run NAME  # run one kernel once (for ncu)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp

import pallaslab
from pallaslab._src.bench import harness, roofline
from pallaslab._src.core.lowering import triton_build
from tests import corpus

ROOT = Path(__file__).resolve().parents[1]

MATMUL_N = 4096
ATTENTION = (32, 2048, 64)  # batch * heads, seq, dim


@dataclasses.dataclass(frozen=True)
class ResourceCase:
    """A Triton-backend kernel: its name on the device, and how to call it."""

    name: str
    kernel_name: str  # part of the kernel's name in the compiled program (ncu --kernel-name)
    build: Callable[[], Callable[..., Any]]
    shapes: tuple[tuple[int, ...], ...]
    dtype: Any = jnp.bfloat16


def _course_attention() -> Callable[..., Any]:
    from benchmarks.gpu_table import course_attention

    attention = course_attention()
    if attention is None:
        raise LookupError("the course's flash attention solution is missing")
    return attention


def cases(
    matmul_n: int = MATMUL_N, attention: tuple[int, int, int] = ATTENTION
) -> list[ResourceCase]:
    """The kernels compared."""
    square = ((matmul_n, matmul_n),) * 2
    return [
        ResourceCase(
            "seed matmul",
            "matmul_kernel",
            lambda: corpus.make_seed_matmul(128, 128, 32, num_warps=8, num_stages=3),
            square,
        ),
        ResourceCase(
            "matmul+gelu",
            "matmul_kernel",
            lambda: corpus.make_seed_matmul(
                128, 128, 32, num_warps=8, num_stages=3, epilogue=jax.nn.gelu
            ),
            square,
        ),
        ResourceCase("flash attention", "flash_kernel", _course_attention, (attention,) * 3),
    ]


def device_arch() -> str:
    """The device's architecture as pallaslab's targets name it ("sm_90"), or ""."""
    capability = str(getattr(jax.devices()[0], "compute_capability", ""))
    return "sm_" + capability.replace(".", "") if capability else ""


def predicted(case: ResourceCase, arch: str, gpu: str) -> dict[str, Any]:
    """pallaslab's `ptx:<arch>` figures for the kernel (occupancy on `gpu`)."""
    specs = [jax.ShapeDtypeStruct(s, case.dtype) for s in case.shapes]
    lowered = pallaslab.inspect(case.build(), *specs).lower(f"ptx:{arch}")
    if lowered.error:
        return {"error": lowered.error.message}
    resources = lowered.resources
    assert resources is not None
    found: dict[str, Any] = {
        "registers": resources.registers_per_thread,
        "shared_bytes": resources.shared_bytes,
        "spill_bytes": (resources.spill_store_bytes or 0) + (resources.spill_load_bytes or 0),
        "threads": resources.threads_per_block,
        "triton": triton_build.triton_version(),
    }
    for occupancy in getattr(resources, "occupancy", ()):
        if occupancy.gpu == gpu:
            found.update(
                blocks_per_sm=occupancy.blocks_per_sm,
                occupancy_pct=100 * occupancy.fraction,
                limiter=occupancy.limiter,
            )
    return found


# ---------------------------------------------------------------------------
# On the device: ncu, else ptxas on XLA's PTX.

# ncu's names for what we read: details-page display names and raw metric names.
_NCU_ALIASES = {
    "registers": ("Registers Per Thread", "launch__registers_per_thread"),
    "static_shared": ("Static Shared Memory Per Block", "launch__shared_mem_per_block_static"),
    "dynamic_shared": ("Dynamic Shared Memory Per Block", "launch__shared_mem_per_block_dynamic"),
    "driver_shared": ("Driver Shared Memory Per Block", "launch__shared_mem_per_block_driver"),
    "threads": ("Block Size", "launch__block_size"),
    "occupancy_pct": ("Theoretical Occupancy", "sm__maximum_warps_per_active_cycle_pct"),
    "limit_registers": ("Block Limit Registers", "launch__occupancy_limit_registers"),
    "limit_shared": ("Block Limit Shared Mem", "launch__occupancy_limit_shared_mem"),
    "limit_warps": ("Block Limit Warps", "launch__occupancy_limit_warps"),
    "limit_blocks": ("Block Limit SM", "launch__occupancy_limit_blocks"),
}


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> dict[str, float]:
    """The first profiled kernel's figures from `ncu --csv --print-units base` output.

    Reads the details page (a row per metric: "Metric Name", "Metric Value") or the
    raw page (a header row of metric names, then values); lines ncu prints before the
    CSV (`==PROF==` ...) are skipped.
    """
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return {}
    header = rows[0]
    metrics: dict[str, str] = {}
    if "Metric Name" in header and "Metric Value" in header:
        name_at, value_at = header.index("Metric Name"), header.index("Metric Value")
        id_at = header.index("ID") if "ID" in header else None
        first_id = rows[1][id_at] if id_at is not None and len(rows) > 1 else None
        for row in rows[1:]:
            if id_at is not None and row[id_at] != first_id:
                break
            metrics.setdefault(row[name_at], row[value_at])
    else:
        values = [r for r in rows[1:] if r and _number(r[-1]) is not None]
        if values:
            metrics = dict(zip(header, values[0], strict=False))
    found: dict[str, float] = {}
    for key, names in _NCU_ALIASES.items():
        for name in names:
            if name in metrics and (value := _number(metrics[name])) is not None:
                found[key] = value
                break
    return found


def find_ncu() -> str | None:
    """Nsight Compute's command line, wherever the image keeps it."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu"):
        matches = sorted(Path("/").glob(pattern.lstrip("/")))
        if matches:
            return str(matches[-1])
    return None


def find_ptxas() -> str | None:
    """A ptxas: CUDA's, else the one in the triton wheel."""
    found = shutil.which("ptxas") or (
        "/usr/local/cuda/bin/ptxas" if Path("/usr/local/cuda/bin/ptxas").exists() else None
    )
    if found:
        return found
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        return str(bundled) if bundled.exists() else None
    except ImportError:
        return None


def _run_self(case: ResourceCase, prefix: Sequence[str], env: dict[str, str]) -> str:
    command = [*prefix, sys.executable, str(Path(__file__).resolve()), "--run", case.name]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])}... exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-600:]}")  # fmt: skip
    return done.stdout


def measured_ncu(case: ResourceCase, ncu: str) -> dict[str, Any]:
    """The launched kernel's figures, read by Nsight Compute."""
    prefix = [
        ncu, "--csv", "--page", "details", "--print-units", "base",
        "--section", "LaunchStats", "--section", "Occupancy",
        "--kernel-name", f"regex:{case.kernel_name}", "--launch-count", "1",
    ]  # fmt: skip
    output = _run_self(case, prefix, dict(os.environ))
    figures = parse_ncu_csv(output)
    if not figures:
        return {"error": "ncu printed no figures: " + output.strip()[-400:]}
    shared = sum(figures.get(k, 0.0) for k in ("static_shared", "dynamic_shared"))
    limits = {k[6:]: v for k, v in figures.items() if k.startswith("limit_")}
    limiter = min(limits, key=lambda k: limits[k]) if limits else ""
    return {
        "source": "ncu",
        "registers": int(figures["registers"]) if "registers" in figures else None,
        "shared_bytes": int(shared),
        "threads": int(figures["threads"]) if "threads" in figures else None,
        "occupancy_pct": figures.get("occupancy_pct"),
        "blocks_per_sm": int(min(limits.values())) if limits else None,
        "limiter": limiter,
    }


def measured_ptxas(case: ResourceCase, arch: str, ptxas: str) -> dict[str, Any]:
    """Registers and spills of the PTX XLA compiled for the kernel (`ptxas -v`)."""
    with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ)
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
        _run_self(case, [], env)
        for ptx in sorted(Path(dump).rglob("*.ptx")):
            text = ptx.read_text(errors="replace")
            if case.kernel_name not in text:
                continue
            target = re.search(r"^\.target\s+([\w]+)", text, re.MULTILINE)
            done = subprocess.run(
                [ptxas, f"-arch={target.group(1) if target else arch}", "-v", str(ptx),
                 "-o", os.devnull],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            log = done.stderr + done.stdout
            entry = _entry_log(log, case.kernel_name)
            figures = triton_build.ptxas_figures(entry)
            return {
                "source": "ptxas -v on XLA's PTX",
                "registers": figures.get("registers"),
                "spill_bytes": figures.get("spill_stores", 0) + figures.get("spill_loads", 0),
                "shared_bytes": None,  # the launch's dynamic shared memory is not in PTX
            }
    return {"error": f"no PTX of {case.kernel_name} in XLA's dump"}


def _entry_log(log: str, name: str) -> str:
    """The part of a ptxas -v log about the entry whose name contains `name`."""
    parts = re.split(r"(?=ptxas info\s*: Compiling entry function)", log)
    for part in parts:
        if name in part.split("\n", 1)[0]:
            return part
    return log


def measured(case: ResourceCase, arch: str) -> dict[str, Any]:
    """The kernel as the GPU compiled and launched it: ncu, else ptxas on XLA's PTX."""
    ncu = find_ncu()
    problems = []
    if ncu:
        try:
            return measured_ncu(case, ncu)
        except Exception as error:
            problems.append(f"ncu: {error}")
    ptxas = find_ptxas()
    if ptxas:
        try:
            found = measured_ptxas(case, arch, ptxas)
            if problems:
                found["note"] = "; ".join(problems)
            return found
        except Exception as error:
            problems.append(f"ptxas: {error}")
    return {"error": "; ".join(problems) or "neither ncu nor ptxas found"}


def run_once(name: str) -> None:
    """Compiles and runs one case's kernel once (what ncu profiles)."""
    jax.config.update("jax_pallas_use_mosaic_gpu", False)  # the course's kernels: Triton
    (case,) = [c for c in cases() if c.name == name]
    keys = jax.random.split(jax.random.key(0), len(case.shapes))
    args = [jax.random.normal(k, s, case.dtype) for k, s in zip(keys, case.shapes, strict=True)]
    jax.block_until_ready(args)
    jax.block_until_ready(case.build()(*args))


def _show(value: Any, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def format_resources(results: Sequence[tuple[str, dict[str, Any], dict[str, Any]]], device: str,
                     arch: str) -> str:  # fmt: skip
    """Markdown: predicted beside measured, one line per kernel."""
    lines = [
        f"Resources on {device} ({arch}): pallaslab's ptx:{arch} prediction | the device's.",
        "",
        "| kernel | registers/thread | shared memory/block (bytes) | spills (bytes) | "
        "blocks/SM | occupancy | limited by | device figures from |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for name, ours, theirs in results:
        for side, figures in (("predicted", ours), ("device", theirs)):
            if "error" in figures:
                notes.append(f"{name} ({side}): {figures['error']}")
            if "note" in figures:
                notes.append(f"{name} ({side}): {figures['note']}")

        def pair(
            key: str, unit: str = "", ours: dict[str, Any] = ours, theirs: dict[str, Any] = theirs
        ) -> str:
            return f"{_show(ours.get(key), unit)} \\| {_show(theirs.get(key), unit)}"

        lines.append(
            f"| {name} | {pair('registers')} | {pair('shared_bytes')} | {pair('spill_bytes')} | "
            f"{pair('blocks_per_sm')} | {pair('occupancy_pct', '%')} | {pair('limiter')} | "
            f"{theirs.get('source', 'n/a')} |"
        )
    if results:
        version = results[0][1].get("triton", "")
        lines.append("")
        lines.append(
            f"predicted: triton {version or '?'} on JAX's TTIR; the device runs XLA's own "
            "Triton, so small differences are expected."
        )
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="run one kernel once and exit (for ncu)")
    options = parser.parse_args(argv)
    if options.run:
        run_once(options.run)
        return 0
    arch = device_arch()
    device = harness.device_name()
    chip = roofline.detect_chip(device)
    if jax.default_backend() != "gpu" or not arch:
        print(f"this needs an NVIDIA GPU; the device here is {device}", file=sys.stderr)
        return 2
    results = []
    for case in cases():
        try:
            ours = predicted(case, arch, chip.name if chip else "")
        except Exception as error:
            ours = {"error": f"{type(error).__name__}: {error}"}
        theirs = measured(case, arch)
        results.append((case.name, ours, theirs))
    print(format_resources(results, device, arch))
    return 1 if any("error" in o or "error" in t for _, o, t in results) else 0


if __name__ == "__main__":
    sys.exit(main())
