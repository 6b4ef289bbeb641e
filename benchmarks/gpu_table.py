"""The GPU table: pallaslab's GPU kernels beside XLA, in TFLOP/s and % of the chip's peak.

Rows, each Pallas kernel beside XLA's version of the same computation, both timed by
pallaslab's harness (inputs on the device, compile apart, L2 flushed between
repetitions, CUPTI device time where JAX offers it):
- the seed matmul (bf16, Triton backend, 128x128x32 blocks, 8 warps, 3 stages), n^3;
- the same with gelu fused before the store;
- the course's flash attention (notebook 06's solution, Triton backend; bf16 inputs,
  (batch*heads, seq, 64), float32 softmax state);
- JAX's Mosaic GPU matmul (`ops.gpu.hopper_matmul_mgpu`, Hopper only), bf16, n^3.
Correctness is checked against XLA's result on the same inputs.

Run: python benchmarks/gpu_table.py                 # on a GPU: the full table
     python benchmarks/gpu_table.py --sizes 1024     # fewer sizes
On a CPU the same code runs at small sizes with the kernels emulated (tests use that);
such timings are labelled and say nothing about GPU speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp

from pallaslab._src.bench import harness, live, roofline
from tests import corpus

ROOT = Path(__file__).resolve().parents[1]

SIZES = (1024, 2048, 4096, 8192)
ATTENTION_SEQS = (1024, 2048, 4096)
ATTENTION_HEADS = 32  # batch * heads
ATTENTION_DIM = 64
COURSE_ATTENTION = ROOT / "notebooks" / "solutions" / "06_flash_attention.py"


@dataclasses.dataclass(frozen=True)
class Case:
    """One computation at one size, as a Pallas kernel and as XLA computes it.

    Attributes:
        family: What is computed ("matmul", "matmul+gelu", "flash attention",
            "Mosaic GPU matmul").
        size: The size, in words ("4096", "32x2048x64").
        pallas: The Pallas implementation (None when it cannot run here).
        xla: XLA's implementation of the same computation (jitted).
        make_args: Inputs for a key.
        flops: Floating-point operations of one call.
        skip: Why the Pallas side cannot run here ("" when it can).
    """

    family: str
    size: str
    pallas: Callable[..., Any] | None
    xla: Callable[..., Any]
    make_args: Callable[[Any], tuple[Any, ...]]
    flops: float
    skip: str = ""


@dataclasses.dataclass(frozen=True)
class Row:
    """A measured implementation of a case."""

    family: str
    size: str
    impl: str  # "pallas" or "xla"
    median_ms: float | None
    tflops: float | None
    pct_of_peak: float | None
    correct: bool | None
    method: str = ""
    error: str = ""
    skipped: bool = False  # cannot run on this machine (the error says why)


def _matmul_xla(a: Any, b: Any) -> Any:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def _matmul_gelu_xla(a: Any, b: Any) -> Any:
    return jax.nn.gelu(jnp.dot(a, b, preferred_element_type=jnp.float32)).astype(a.dtype)


def _square_inputs(n: int, dtype: Any) -> Callable[[Any], tuple[Any, ...]]:
    def make(key: Any) -> tuple[Any, ...]:
        ka, kb = jax.random.split(key)
        return (jax.random.normal(ka, (n, n), dtype), jax.random.normal(kb, (n, n), dtype))

    return make


def course_attention() -> Callable[..., Any] | None:
    """The course's flash attention (notebook 06's solution), or None without it."""
    if not COURSE_ATTENTION.exists():  # a teacher may hand the course out without it
        return None
    spec = importlib.util.spec_from_file_location("course_flash_attention", COURSE_ATTENTION)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention  # type: ignore[no-any-return]


def _attention_xla(q: Any, k: Any, v: Any) -> Any:
    from pallaslab._src.course.catalog.attention import attention_reference

    return attention_reference(q, k, v)


def _attention_inputs(heads: int, seq: int, dim: int) -> Callable[[Any], tuple[Any, ...]]:
    def make(key: Any) -> tuple[Any, ...]:
        kq, kk, kv = jax.random.split(key, 3)
        shape = (heads, seq, dim)
        return tuple(jax.random.normal(k, shape, jnp.bfloat16) for k in (kq, kk, kv))

    return make


def hopper_skip() -> str:
    """Why JAX's Hopper Mosaic GPU matmul cannot run here ("" when it can)."""
    device = jax.devices()[0]
    capability = str(getattr(device, "compute_capability", ""))
    if device.platform != "gpu":
        return f"needs a Hopper GPU (sm_90); this is {device.platform}"
    if not capability.startswith("9."):
        return f"needs a Hopper GPU (sm_90); this one is sm_{capability.replace('.', '')}"
    return ""


def mosaic_gpu_matmul() -> Callable[..., Any]:
    """JAX's Hopper matmul (Mosaic GPU: TMA, wgmma, warp specialization).

    128x128x64 tiles, 4 pipeline stages: one of the configurations JAX's own tuning
    loop for this kernel tries (not tuned here).
    """
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as mgpu

    config = mgpu.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=4)
    return jax.jit(lambda a, b: mgpu.matmul(a, b, None, config))


def cases(
    sizes: Sequence[int] = SIZES,
    attention_seqs: Sequence[int] = ATTENTION_SEQS,
    attention_heads: int = ATTENTION_HEADS,
    attention_dim: int = ATTENTION_DIM,
    mosaic: bool = True,
) -> Iterator[Case]:
    """Every case of the table, in the order printed."""
    seed = corpus.make_seed_matmul(128, 128, 32, num_warps=8, num_stages=3)
    gelu = corpus.make_seed_matmul(128, 128, 32, num_warps=8, num_stages=3, epilogue=jax.nn.gelu)
    for n in sizes:
        args = _square_inputs(n, jnp.bfloat16)
        yield Case("matmul", str(n), seed, jax.jit(_matmul_xla), args, 2.0 * n**3)
        yield Case("matmul+gelu", str(n), gelu, jax.jit(_matmul_gelu_xla), args, 2.0 * n**3)
    attention = course_attention()
    for seq in attention_seqs:
        yield Case(
            "flash attention",
            f"{attention_heads}x{seq}x{attention_dim}",
            attention,
            jax.jit(_attention_xla),
            _attention_inputs(attention_heads, seq, attention_dim),
            4.0 * attention_heads * seq * seq * attention_dim,
            "" if attention else f"the course's solution is not at {COURSE_ATTENTION}",
        )
    if mosaic:
        skip = hopper_skip()
        matmul = None if skip else mosaic_gpu_matmul()
        for n in sizes:
            args = _square_inputs(n, jnp.bfloat16)
            yield Case(
                "Mosaic GPU matmul", str(n), matmul, jax.jit(_matmul_xla), args, 2.0 * n**3, skip
            )


def _close(got: Any, want: Any) -> bool:
    got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
    scale = float(jnp.max(jnp.abs(want))) or 1.0
    return bool(float(jnp.max(jnp.abs(got - want))) <= 2e-2 * scale)


def measure(
    case: Case, settings: harness.TimerSettings | None = None, peak: float = 0.0
) -> list[Row]:
    """The case's XLA row and Pallas row (timed, checked against XLA's result)."""
    args = case.make_args(jax.random.key(0))
    rows = []
    want = None
    for impl, fn in (("xla", case.xla), ("pallas", case.pallas)):
        if fn is None:
            skipped = Row(case.family, case.size, impl, None, None, None, None, error=case.skip)
            rows.append(dataclasses.replace(skipped, skipped=True))
            continue
        try:
            timing, out = harness.measure_prepared(harness.prepare(fn, args, {}), settings)
        except Exception as error:  # one case failing spoils no other row
            message = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"
            rows.append(Row(case.family, case.size, impl, None, None, None, None, error=message))
            continue
        if impl == "xla":
            want = out
        seconds = timing.median_ms / 1e3
        tflops = case.flops / seconds / 1e12 if seconds > 0 else None
        rows.append(
            Row(
                case.family,
                case.size,
                impl,
                timing.median_ms,
                tflops,
                100 * case.flops / seconds / peak if peak and seconds > 0 else None,
                _close(out, want) if impl == "pallas" and want is not None else None,
                method=timing.method,
            )
        )
    return rows


def run(
    table_cases: Sequence[Case] | Iterator[Case],
    settings: harness.TimerSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Row]:
    """Measures every case; `progress` hears about each as it finishes."""
    chip = roofline.detect_chip(harness.device_name())
    peak = chip.peak_flops("bfloat16")[0] if chip and chip.kind == "gpu" else 0.0
    rows: list[Row] = []
    for case in table_cases:
        started = time.perf_counter()
        measured = measure(case, settings, peak)
        rows.extend(measured)
        if progress:
            took = time.perf_counter() - started
            progress(f"{case.family} {case.size}: {took:.1f} s")
    return rows


def _cell(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:{spec}}{suffix}"


def format_table(rows: Sequence[Row], device: str, versions: str, peak_text: str) -> str:
    """The table as markdown: one line per case, Pallas beside XLA."""
    lines = [
        f"GPU table on {device} ({versions}); peak: {peak_text}.",
        "",
        "| kernel | size | Pallas ms | Pallas TFLOP/s | Pallas % of peak | XLA ms | "
        "XLA TFLOP/s | XLA % of peak | XLA time / Pallas time | Pallas correct |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_case: dict[tuple[str, str], dict[str, Row]] = {}
    for row in rows:
        by_case.setdefault((row.family, row.size), {})[row.impl] = row
    notes = []
    for (family, size), pair in by_case.items():
        pallas, xla = pair.get("pallas"), pair.get("xla")
        ratio = (
            xla.median_ms / pallas.median_ms
            if pallas and xla and pallas.median_ms and xla.median_ms
            else None
        )
        cells = []
        for row in (pallas, xla):
            cells += [
                _cell(row.median_ms if row else None, ".4g"),
                _cell(row.tflops if row else None, ".3g"),
                _cell(row.pct_of_peak if row else None, ".0f", "%"),
            ]
        correct = "n/a" if pallas is None or pallas.correct is None else str(pallas.correct)
        lines.append(
            f"| {family} | {size} | {' | '.join(cells[:3])} | {' | '.join(cells[3:])} | "
            f"{_cell(ratio, '.2f', 'x')} | {correct} |"
        )
        notes.extend(
            f"{family} {size} ({row.impl}): {row.error}"
            for row in (pallas, xla)
            if row and row.error
        )
    methods = sorted({row.method for row in rows if row.method})
    lines.append("")
    lines += [f"timing: {m}" for m in methods]
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def describe_device() -> tuple[str, str, str]:
    """(device, versions, peak in words) for the table's heading."""
    import jaxlib

    device = harness.device_name()
    versions = f"jax {jax.__version__}, jaxlib {jaxlib.__version__}"
    try:
        import triton

        versions += f", triton {triton.__version__}"
    except ImportError:
        pass
    chip = roofline.detect_chip(device)
    if chip is None or chip.kind != "gpu":
        peak = (
            f"none known for {device} [{live.CPU_LABEL}]"
            if jax.default_backend() == "cpu"
            else (f"{device} is not in pallaslab's hardware table")
        )
    else:
        value, what = chip.peak_flops("bfloat16")
        peak = f"{what}, {value / 1e12:.0f} TFLOP/s"
    return device, versions, peak


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seqs", type=int, nargs="+", default=list(ATTENTION_SEQS))
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    options = parser.parse_args(argv)
    if jax.default_backend() == "gpu":
        # The course's kernels are written for the Triton backend (as notebook 06 says).
        jax.config.update("jax_pallas_use_mosaic_gpu", False)
    settings = harness.TimerSettings(budget_s=options.budget)
    rows = run(
        cases(options.sizes, options.seqs),
        settings,
        progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True),
    )
    print(format_table(rows, *describe_device()))
    if options.json:
        options.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    bad = [r for r in rows if r.correct is False or (r.error and not r.skipped)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
