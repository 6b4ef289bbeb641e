"""The roofline: how much work a program does, and how close a timing is to the chip's roof.

Work comes, in order of preference, from the user; from the kernels' declared
`pl.CostEstimate`; from `Kernel.work` (arithmetic counted from the traced kernel
bodies); from XLA's cost analysis of the reference. Bytes: the user's, the declared
`bytes_accessed`, else the program's inputs and outputs (the traffic no
implementation can avoid). Peaks come from pallaslab's hardware table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.records import ArraySpec, Kernel, hardware

_LOW_PRECISION = ("bfloat16", "float16", "float8")


@dataclasses.dataclass(frozen=True)
class Chip:
    """A chip from the hardware table, for rooflines.

    Attributes:
        name: Its name in the table ("H100", "v5e").
        kind: "gpu" or "tpu".
        spec: The table's entry.
    """

    name: str
    kind: str
    spec: hardware.Gpu | hardware.Tpu

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth, bytes per second."""
        return self.spec.memory_bandwidth

    def peak_flops(self, dtype: str) -> tuple[float, str]:
        """Peak FLOP/s for arithmetic in `dtype`, and what that peak is, in words."""
        if isinstance(self.spec, hardware.Gpu):
            if dtype.startswith(_LOW_PRECISION):
                return self.spec.bf16_flops, f"{self.name} BF16 dense tensor-core peak"
            return self.spec.fp32_flops, f"{self.name} FP32 (non-tensor-core) peak"
        return self.spec.bf16_flops, f"TPU {self.name} BF16 peak"


def chip_named(name: str) -> Chip:
    """The chip called `name` in the hardware table ("H100", "v5e" ...).

    Raises:
        KeyError: Naming the known chips, when there is none such.
    """
    try:
        gpu = hardware.gpu(name)
        return Chip(gpu.name, "gpu", gpu)
    except KeyError:
        pass
    try:
        tpu = hardware.tpu(name)
        return Chip(tpu.name, "tpu", tpu)
    except KeyError:
        known = ", ".join([*hardware.GPUS, *hardware.TPUS])
        raise KeyError(f"no chip {name!r} in pallaslab's hardware table; known: {known}") from None


# TPU device kinds as JAX reports them, to the table's names.
_TPU_KINDS = (
    ("v6 lite", "v6e"),
    ("v6e", "v6e"),
    ("v5 lite", "v5e"),
    ("v5e", "v5e"),
    ("v5p", "v5p"),
    ("v5", "v5p"),
    ("v4", "v4"),
    ("7x", "7x"),
    ("v7", "7x"),
)


def detect_chip(device_kind: str) -> Chip | None:
    """The table's chip for a JAX device kind ("NVIDIA H100 80GB HBM3", "TPU v5 lite")."""
    kind = device_kind.lower()
    if "tpu" in kind:
        for needle, name in _TPU_KINDS:
            if needle in kind:
                return chip_named(name)
        return None
    # Longest names first, so "RTX 4090" is not taken for something shorter.
    for name in sorted(hardware.GPUS, key=len, reverse=True):
        if name.lower() in kind:
            return chip_named(name)
    return None


@dataclasses.dataclass(frozen=True)
class Work:
    """What one call computes and moves.

    Attributes:
        flops: Floating-point operations (None when unknown).
        bytes: Bytes moved to and from device memory (None when unknown).
        flops_source: Where `flops` comes from, in words.
        bytes_source: Where `bytes` comes from, in words.
        dtype: The dtype that sets the peak (the widest floating input's).
    """

    flops: float | None
    bytes: float | None
    flops_source: str = ""
    bytes_source: str = ""
    dtype: str = "float32"

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes


def program_work(
    kernels: Sequence[Kernel],
    args: Sequence[ArraySpec],
    outputs: Sequence[ArraySpec],
    *,
    flops: float | None = None,
    bytes_accessed: float | None = None,
    xla_cost: Callable[[], dict[str, float] | None] | None = None,
) -> Work:
    """The work of a program, from the best source available (see the module doc).

    Args:
        kernels: The program's kernels.
        args: Its inputs' shapes and dtypes.
        outputs: Its outputs' shapes and dtypes.
        flops: The user's count, which wins.
        bytes_accessed: The user's count, which wins.
        xla_cost: Returns XLA's cost analysis of the reference, asked only when the
            kernels say nothing.
    """
    dtype = _dominant_dtype(args)
    flops_source = bytes_source = "given"
    if flops is None:
        declared = [k.cost_estimate for k in kernels]
        counted = [k.work for k in kernels]
        if kernels and all(c is not None for c in declared):
            flops = float(sum(c.flops for c in declared if c is not None))
            flops_source = "the kernels' declared pl.CostEstimate"
        elif kernels and all(w is not None for w in counted):
            flops = float(sum(w.flops for w in counted if w is not None))
            exact = all(w.exact for w in counted if w is not None)
            flops_source = "counted from the kernel bodies" + ("" if exact else " (estimate)")
        elif xla_cost is not None and (cost := _safe(xla_cost)) and cost.get("flops"):
            flops = float(cost["flops"])
            flops_source = "XLA's cost analysis of the reference"
        else:
            flops_source = "unknown"
    if bytes_accessed is None:
        declared = [k.cost_estimate for k in kernels]
        if kernels and all(c is not None for c in declared):
            bytes_accessed = float(sum(c.bytes_accessed for c in declared if c is not None))
            bytes_source = "the kernels' declared pl.CostEstimate"
        elif args or outputs:
            bytes_accessed = float(sum(a.nbytes for a in (*args, *outputs)))
            bytes_source = "the program's inputs and outputs (compulsory traffic)"
        else:
            bytes_source = "unknown"
    return Work(flops, bytes_accessed, flops_source, bytes_source, dtype)


def xla_cost_analysis(fn: Callable[..., Any], args: Sequence[Any]) -> dict[str, float] | None:
    """XLA's cost analysis of `jax.jit(fn)` on these arguments (None if it has none)."""
    cost = jax.jit(fn).lower(*args).cost_analysis()
    if isinstance(cost, list | tuple):  # older JAX: one dict per computation
        cost = cost[0] if cost else None
    if not cost:
        return None
    return {str(k): float(v) for k, v in dict(cost).items() if isinstance(v, int | float)}


def attainable(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roof at this arithmetic intensity: min(peak, intensity x bandwidth), FLOP/s."""
    return min(peak_flops, intensity * bandwidth)


def pct_of_peak(work: Work, seconds: float, peak_flops: float, bandwidth: float) -> float:
    """How close a timing is to the roof at its intensity, in percent (NaN if unknown).

    That is achieved FLOP/s over min(peak, intensity x bandwidth), which equals the
    larger of "FLOP/s over peak FLOP/s" and "bytes/s over peak bandwidth".
    """
    if seconds <= 0 or not math.isfinite(seconds):
        return math.nan
    shares = []
    if work.flops and peak_flops:
        shares.append(work.flops / seconds / peak_flops)
    if work.bytes and bandwidth:
        shares.append(work.bytes / seconds / bandwidth)
    return 100.0 * max(shares) if shares else math.nan


def _dominant_dtype(args: Sequence[ArraySpec]) -> str:
    floating = [a for a in args if np.dtype(a.dtype).kind == "f" or a.dtype == "bfloat16"]
    if not floating:
        return "float32"
    return max(floating, key=lambda a: a.nbytes).dtype


def _safe(fn: Callable[[], dict[str, float] | None]) -> dict[str, float] | None:
    try:
        return fn()
    except Exception:
        return None
