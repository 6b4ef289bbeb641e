"""Memory that fits, per chip: a kernel's real compile against each chip's limits.

TPU (`tpu-compile:<chip>`, libtpu): the scoped VMEM the compile allocates, read from
its LLO allocation table (the BlockSpecs' windows x their buffering levels, scratch,
spills; Mosaic's internal scratch does not count against the limit), against the
kernel's `vmem_limit_bytes` or the chip's default scoped limit. A kernel over the
default is compiled once more with the limit at the chip's whole VMEM: if that
compiles, its allocation table gives the exact `vmem_limit_bytes` to pass; if not, it
does not fit on the chip. GPU (`xla-gpu:<chip>`): shared memory per block and
registers per thread from XLA's compile and ptxas, against the chip's limits.

Chips are compiled in parallel, each in its own worker process, and cached with the
inspection's other lowerings.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import words
from pallaslab._src.core import jax_adapter, lowering
from pallaslab._src.core.lowering import tpu_compile, tpu_memory, tpu_rules
from pallaslab._src.core.lowering.engine import lowerer_for
from pallaslab._src.core.program import require_program
from pallaslab._src.records import Kernel, hardware
from pallaslab._src.records.fit import (
    Allocation,
    FitPart,
    FitTable,
    MemoryFit,
    Verdict,
    own_vmem_limit,
    scoped_vmem,
    space_bytes,
)
from pallaslab._src.records.lowered import GpuResources, Lowered, TpuResources

if TYPE_CHECKING:
    from pallaslab._src.core.program import Traced

TPU_CHIPS = tuple(hardware.TPUS)
GPU_CHIPS = ("A100", "H100", "H200", "B200")
CHIPS = TPU_CHIPS + GPU_CHIPS
# Compiles at once: each is a process of its own (libtpu or XLA, several hundred MB).
PARALLEL = max(2, min(4, os.cpu_count() or 2))


def fit_table(
    inspection: Traced,
    kernel: int | str = 0,
    chips: Sequence[str] | None = None,
    *,
    parallel: int = PARALLEL,
    compile: bool = True,
) -> FitTable:
    """The kernel's memory on each chip (default: every TPU and GPU), compiled in parallel.

    With `compile=False` nothing is compiled: chips already compiled for are read,
    the others estimated from the BlockSpecs (TPU) or left unknown (GPU).
    """
    chosen = inspection.kernel(kernel)
    names = tuple(chips) if chips else CHIPS
    for name in names:
        _kind(name)  # an unknown chip fails before anything compiles
    if not compile:
        rows = tuple(chip_fit(inspection, chosen, chip, compile=False) for chip in names)
        return FitTable(chosen.name, chosen.index, rows)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        rows = tuple(pool.map(lambda chip: chip_fit(inspection, chosen, chip), names))
    return FitTable(chosen.name, chosen.index, rows)


def _kind(chip: str) -> str:
    try:
        hardware.tpu(chip)
    except KeyError:
        pass
    else:
        return "tpu"
    try:
        hardware.gpu(chip)
    except KeyError:
        raise KeyError(
            f"no chip {chip!r}: TPUs {', '.join(TPU_CHIPS)}; GPUs {', '.join(GPU_CHIPS)}"
        ) from None
    return "gpu"


def chip_fit(inspection: Traced, kernel: Kernel, chip: str, *, compile: bool = True) -> MemoryFit:
    """One kernel on one chip (`compile=False`: only from a compile already made).

    A row read from compiles is kept with the inspection's lowerings: asked again, it
    is looked up.
    """
    if not compile:
        return _chip_fit(inspection, kernel, chip, compile=False)
    lowerer = lowerer_for(require_program(inspection, "compile it"))
    return lowerer.share(
        ("fit", kernel.index, chip), lambda: _chip_fit(inspection, kernel, chip, compile=True)
    )


def _chip_fit(inspection: Traced, kernel: Kernel, chip: str, *, compile: bool) -> MemoryFit:
    if _kind(chip) == "tpu":
        return tpu_fit(inspection, kernel, hardware.tpu(chip).name, compile=compile)
    return gpu_fit(inspection, kernel, hardware.gpu(chip).name, compile=compile)


def _lowered(inspection: Traced, kernel: Kernel, target: str, *, compile: bool) -> Lowered | None:
    """The kernel's lowering for `target`: made now, or (`compile=False`) if made before."""
    if compile:
        return lowering.lower(inspection, target, kernel.index)
    for done in reversed(lowering.lowerings(inspection)):
        if done.kernel_index == kernel.index and done.target == target:
            return done
    return None


# ---------------------------------------------------------------------------
# TPU


def estimated_parts(kernel: Kernel) -> tuple[FitPart, ...]:
    """What the BlockSpecs and scratch shapes say the kernel takes, in (8, 128) tiles."""
    return tuple(
        FitPart(
            name=block.operand,
            role=block.role,
            bytes=block.padded_bytes,
            buffers=block.buffers,
            origin="estimated",
            detail=f"{block.dtype}[{','.join(map(str, block.block_shape))}] x {block.buffers}",
        )
        for block in tpu_rules.vmem_blocks(kernel)
    )


def read_parts(kernel: Kernel, allocations: tuple[Allocation, ...]) -> tuple[FitPart, ...]:
    """The compiler's VMEM allocations, named after the kernel's operands."""
    inputs = [o for o in kernel.operands if o.role == "in" and not o.scalar_prefetch]
    outputs = [o for o in kernel.operands if o.role == "out"]
    scratch = iter(o for o in kernel.operands if o.role == "scratch")
    parts = []
    for allocation in allocations:
        if allocation.space != "vmem" or allocation.fixed:
            continue
        name = {"internal": "Mosaic's internal scratch", "spill": "register spills"}.get(
            allocation.role, allocation.role
        )
        pool = inputs if allocation.role == "in" else outputs
        if allocation.role in ("in", "out") and allocation.operand is not None:
            index = allocation.operand
            name = pool[index].label if index < len(pool) else f"{allocation.role} {index}"
        elif allocation.role == "scratch":
            operand = next(scratch, None)
            name = operand.label if operand is not None else "scratch"
        detail = allocation.shape
        if allocation.role in ("in", "out"):
            detail += f" x {allocation.buffers}"
        parts.append(
            FitPart(
                name=name,
                role=allocation.role,
                bytes=allocation.bytes,
                buffers=allocation.buffers if allocation.role in ("in", "out") else 1,
                origin="read",
                counted=allocation.counted,
                detail=detail,
            )
        )
    return tuple(parts)


def _probe(inspection: Traced, kernel: Kernel, chip: str, limit: int) -> tpu_compile.TpuCompile:
    """The kernel compiled for `chip` with `vmem_limit_bytes=limit` (cached per chip)."""
    lowerer = lowerer_for(require_program(inspection, "compile it"))

    def make() -> tpu_compile.TpuCompile:
        site = jax_adapter.with_vmem_limit(lowerer.site(kernel, chip), limit)
        if site is None:
            return tpu_compile.TpuCompile(chip, error="its compiler params take no VMEM limit")
        with lowerer.jax_lock:
            exported = jax_adapter.export_for_tpu(
                jax_adapter.kernel_function(site), jax_adapter.kernel_avals(site), chip
            )
        return tpu_compile.compile_exported(exported, chip)

    return lowerer.share(("tpu-fit-probe", kernel.index, chip, limit), make)


def tpu_fit(inspection: Traced, kernel: Kernel, chip: str, *, compile: bool = True) -> MemoryFit:
    """The kernel's scoped VMEM on a TPU, from a libtpu compile."""
    tpu = hardware.tpu(chip)
    target = f"tpu-compile:{chip}"
    own = own_vmem_limit(kernel)
    limit = own or tpu.default_scoped_vmem
    limit_from = "the kernel's vmem_limit_bytes" if own else f"{chip}'s default scoped VMEM"
    estimate = estimated_parts(kernel)
    estimated = sum(p.bytes for p in estimate) if estimate else None
    base = MemoryFit(
        chip=chip,
        target=target,
        kind="tpu",
        memory="VMEM",
        needed=None,
        needed_from="",
        limit=limit,
        limit_from=limit_from,
        capacity=tpu.vmem_per_core,
        verdict="unknown",
        estimated=estimated,
    )
    lowered = _lowered(inspection, kernel, target, compile=compile)
    if lowered is None:
        return _estimated_fit(base, estimate, tpu)
    if lowered.error is None and isinstance(lowered.resources, TpuResources):
        return _compiled_fit(kernel, tpu, lowered.resources.allocations, base, own=own)
    error = lowered.error
    detail = (error.detail or error.message) if error else ""
    if error is not None and error.kind in ("unavailable", "tiling", "usage", "unsupported"):
        return dataclasses.replace(
            base,
            needed=estimated,
            needed_from="estimated" if estimated is not None else "",
            verdict="unknown",
            parts=estimate,
            message=f"not compiled: {error.message}",
            error=detail,
        )
    scoped = tpu_memory.scoped_oom(detail)
    over = tpu_memory.capacity_oom(detail)
    if scoped is not None and not compile:
        return dataclasses.replace(
            base,
            needed=scoped[0],
            needed_from="read, rounded",
            verdict="fits-with-limit" if scoped[0] <= tpu.vmem_per_core else "does-not-fit",
            parts=estimate,
            message=(
                f"over the limit: about {words.nbytes(scoped[0])} of scoped VMEM "
                "(compile for every chip to read the exact vmem_limit_bytes)"
            ),
            error=detail,
        )
    if scoped is not None:
        probe = _probe(inspection, kernel, chip, tpu.vmem_per_core)
        if not probe.error:
            allocations = tpu_memory.allocations(probe.llo)
            return _compiled_fit(kernel, tpu, allocations, base, own=own, over_limit=scoped[1])
        over = tpu_memory.capacity_oom(probe.error) or over
        scoped = tpu_memory.scoped_oom(probe.error) or scoped
        needed = over[0] if over else scoped[0]
        return dataclasses.replace(
            base,
            needed=needed,
            needed_from="read, rounded",
            verdict="does-not-fit",
            parts=estimate,
            message=(
                f"does not fit on {chip}: about {words.nbytes(needed)} of scoped VMEM, more "
                f"than the {words.nbytes(tpu.vmem_per_core)} of VMEM a TensorCore has, "
                "even with vmem_limit_bytes at all of it"
            ),
            error=probe.error or detail,
        )
    if over is not None:
        return dataclasses.replace(
            base,
            needed=over[0],
            needed_from="read, rounded",
            verdict="does-not-fit",
            parts=estimate,
            message=(
                f"does not fit on {chip}: about {words.nbytes(over[0])} of VMEM, more than "
                f"its {words.nbytes(over[1])}"
            ),
            error=detail,
        )
    return dataclasses.replace(
        base,
        needed=estimated,
        needed_from="estimated" if estimated is not None else "",
        verdict="unknown",
        parts=estimate,
        message=f"libtpu could not compile it: {error.message if error else 'no result'}",
        error=detail,
    )


def _estimated_fit(base: MemoryFit, estimate: tuple[FitPart, ...], tpu: hardware.Tpu) -> MemoryFit:
    """A TPU row from the BlockSpecs alone (no compile for the chip yet)."""
    if base.estimated is None:
        return dataclasses.replace(base, message="not compiled for this chip yet")
    needed = base.estimated
    verdict: Verdict = "fits"
    if needed > tpu.vmem_per_core:
        verdict = "does-not-fit"
    elif needed > base.limit:
        verdict = "fits-with-limit"
    return dataclasses.replace(
        base,
        needed=needed,
        needed_from="estimated",
        verdict=verdict,
        suggested_limit=needed if verdict == "fits-with-limit" else None,
        parts=estimate,
        message=(
            f"estimated from the BlockSpecs: {words.nbytes(needed)} against "
            f"{words.nbytes(base.limit)}; compile for the chip to read libtpu's figure"
        ),
    )


def _compiled_fit(
    kernel: Kernel,
    tpu: hardware.Tpu,
    allocations: tuple[Allocation, ...],
    base: MemoryFit,
    *,
    own: int | None,
    over_limit: int | None = None,
) -> MemoryFit:
    needed = scoped_vmem(allocations)
    default = tpu.default_scoped_vmem
    figures: dict[str, Any] = {
        "needed": needed,
        "needed_from": "read",
        "total_vmem": space_bytes(allocations, "vmem"),
        "smem_bytes": space_bytes(allocations, "smem"),
        "semaphores": sum(a.bytes // 4 for a in allocations if a.space == "sflag" and not a.fixed),
        "parts": read_parts(kernel, allocations),
    }
    chip = tpu.name
    if needed <= default and over_limit is None and (own is None or needed <= own):
        return dataclasses.replace(
            base,
            **figures,
            verdict="fits",
            message=(
                f"fits: {words.nbytes(needed)} of scoped VMEM, within {chip}'s default "
                f"{words.nbytes(default)}"
            ),
        )
    if own is not None and needed <= own:
        text = (
            f"fits with its vmem_limit_bytes={own:,}: {words.nbytes(needed)} of scoped VMEM, "
            f"over {chip}'s default {words.nbytes(default)} (vmem_limit_bytes >= {needed:,} "
            "is enough)"
        )
    else:
        text = (
            f"fits only with pltpu.CompilerParams(vmem_limit_bytes={needed:,}) or more: "
            f"{words.nbytes(needed)} of scoped VMEM, over "
            f"{'its vmem_limit_bytes' if own else chip + chr(39) + 's default'} "
            f"{words.nbytes(own or default)}"
        )
    return dataclasses.replace(
        base,
        **figures,
        verdict="fits-with-limit",
        suggested_limit=needed,
        message=text,
    )


# ---------------------------------------------------------------------------
# GPU


def gpu_fit(inspection: Traced, kernel: Kernel, chip: str, *, compile: bool = True) -> MemoryFit:
    """The kernel's shared memory and registers on a GPU, from XLA's compile."""
    gpu = hardware.gpu(chip)
    target = f"xla-gpu:{chip}"
    base = MemoryFit(
        chip=chip,
        target=target,
        kind="gpu",
        memory="shared memory",
        needed=None,
        needed_from="",
        limit=gpu.max_shared_memory_per_block,
        limit_from="shared memory a block may opt in to",
        capacity=gpu.shared_memory_per_sm,
        verdict="unknown",
    )
    lowered = _lowered(inspection, kernel, target, compile=compile)
    if lowered is None:
        return dataclasses.replace(base, message="not compiled for this chip yet")
    resources = lowered.resources
    if lowered.error is not None or not isinstance(resources, GpuResources):
        return _gpu_unknown(base, lowered)
    shared = resources.shared_bytes
    registers = resources.registers_per_thread
    threads = resources.threads_per_block
    problems = []
    if shared > gpu.max_shared_memory_per_block:
        problems.append(
            f"{words.nbytes(shared)} of shared memory per block, over the "
            f"{words.nbytes(gpu.max_shared_memory_per_block)} a block may have"
        )
    if registers and registers * threads > gpu.registers_per_sm:
        problems.append(
            f"{registers} registers x {threads} threads, over the {gpu.registers_per_sm} "
            "registers of an SM"
        )
    figures: dict[str, Any] = {
        "needed": shared,
        "needed_from": "read",
        "registers_per_thread": registers,
        "threads_per_block": threads,
        "parts": (
            FitPart("shared memory", "shared", shared, origin="read", detail=resources.arch),
        ),
    }
    if problems:
        return dataclasses.replace(
            base,
            **figures,
            verdict="does-not-fit",
            message=f"does not fit on {chip}: " + "; ".join(problems),
        )
    opt_in = " (over 48 KiB: the launch opts in, as XLA does)" if shared > 48 * 1024 else ""
    return dataclasses.replace(
        base,
        **figures,
        verdict="fits",
        message=(
            f"fits: {words.nbytes(shared)} of shared memory per block{opt_in}, "
            f"{registers or '?'} registers per thread"
        ),
    )


def _gpu_unknown(base: MemoryFit, lowered: Lowered) -> MemoryFit:
    error = lowered.error
    text = error.message if error else "XLA reported no resources"
    lowered_text = text.lower()
    verdict: Verdict = "unknown"
    if "shared memory" in lowered_text and ("exceed" in lowered_text or "too" in lowered_text):
        verdict = "does-not-fit"
    return MemoryFit(
        **base,  # type: ignore[arg-type]
        needed=None,
        needed_from="",
        verdict=verdict,
        message=(f"does not fit: {text}" if verdict == "does-not-fit" else f"not compiled: {text}"),
        error=(error.detail or error.message) if error else "",
    )
