"""The Tiles tab's Mosaic GPU part: SMEM per chip, copies, products, pipelines, work.

Built from the kernel's plan (`Inspection.plan`), its SMEM budget (`Inspection.smem`)
and the chip table; every part that is empty says why in one sentence.
"""

from __future__ import annotations

from pallaslab._src.base import words
from pallaslab._src.geometry.mosaic_gpu import SmemBudget, copy_steps, plan_chips, transforms_text
from pallaslab._src.records import Kernel, SourceLocation, short_dtype
from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan
from pallaslab._src.views import where
from pallaslab._src.views.contracts import (
    CopyRow,
    MmaRow,
    MosaicGpuModel,
    PipelineBuffer,
    PipelineRow,
    SmemChip,
    SmemModel,
    SmemRow,
)
from pallaslab._src.views.tilesdata.figures import si

#: Why the Tiles tab records no element-level accesses for a Mosaic GPU kernel.
ACCESSES_NOTE = (
    "Element-level loads and stores are recorded for Pallas' generic and Triton kernels; "
    "a Mosaic GPU kernel's traffic is its copies, listed under Mosaic GPU."
)
_COPY_KINDS = {
    "tma-load": "TMA GMEM \u2192 SMEM",
    "tma-store": "TMA SMEM \u2192 GMEM",
    "load": "load GMEM \u2192 registers",
    "store": "store registers \u2192 GMEM",
}


def _line(location: SourceLocation | None, kernel: Kernel) -> str:
    """A line as the views name it ("Cell [2] line 14"); "" for a library's, or none."""
    shown = where.location(location, where.kernel_files([kernel]))
    return f"{shown['label']} line {shown['line']}" if shown is not None else ""


def _array(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{short_dtype(dtype)}[{','.join(map(str, shape))}]"


def smem_json(budget: SmemBudget, plan: MosaicGpuPlan, kernel: Kernel) -> SmemModel:
    """Each allocation, the total, and the total against each chip's limit per block."""
    rows: list[SmemRow] = []
    for line in budget.lines:
        a = line.allocation
        shape = f"{a.count} \u00d7 barrier" if a.kind == "barrier" else _array(a.dtype, a.shape)
        stored = "" if a.kind == "barrier" else _array(a.dtype, a.stored_shape)
        rows.append(
            {
                "label": a.label,
                "kind": a.kind,
                "shape": shape,
                "stored": stored if stored != shape else "",
                "transforms": transforms_text(a.transforms),
                "bytes": line.bytes,
                "bytesText": words.nbytes(line.bytes) if line.bytes else "0",
                "depth": max(0, line.depth),
                "atPeak": line.at_peak,
                "pipeline": a.pipeline,
                "line": _line(a.location, kernel),
            }
        )
    chips: list[SmemChip] = []
    for gpu in plan_chips():
        fit = budget.on_chip(gpu, plan)
        chips.append(
            {
                "chip": fit.chip,
                "limit": fit.limit,
                "limitText": words.nbytes(fit.limit),
                "fits": fit.fits,
                "share": round(fit.share, 4),
                "blocksPerSm": fit.blocks_per_sm,
                "note": fit.note,
            }
        )
    return {
        "rows": rows,
        "total": budget.total,
        "totalText": words.nbytes(budget.total),
        "summary": budget.describe(),
        "chips": chips,
    }


def _copies(plan: MosaicGpuPlan, kernel: Kernel) -> list[CopyRow]:
    rows: list[CopyRow] = []
    for c in plan.copies:
        operand = kernel.operands[c.operand].label if c.operand < len(kernel.operands) else "?"
        rows.append(
            {
                "kind": _COPY_KINDS.get(c.kind, c.kind),
                "operand": operand,
                "smem": c.smem,
                "window": _array(c.dtype, c.window),
                "bytesEachText": words.nbytes(c.bytes_each),
                "copies": c.copies,
                "totalText": words.nbytes(c.gmem_bytes),
                "exact": c.exact,
                "multicast": c.multicast,
                "pipeline": c.pipeline,
                "line": _line(c.location, kernel),
            }
        )
    return rows


def _mmas(plan: MosaicGpuPlan, kernel: Kernel) -> list[MmaRow]:
    rows: list[MmaRow] = []
    for m in plan.mmas:
        layout = "; ".join(
            f"{side}: {transforms_text(t)}"
            for side, t in (("A", m.lhs_transforms), ("B", m.rhs_transforms))
            if t
        )
        rows.append(
            {
                "kind": m.kind + (f" (collective over {m.collective})" if m.collective else ""),
                "shape": f"{m.m} \u00d7 {m.n} \u00d7 {m.k}",
                "dtypes": f"{short_dtype(m.lhs_dtype)} \u00d7 {short_dtype(m.rhs_dtype)} "
                f"\u2192 {short_dtype(m.acc_dtype)}",
                "lhs": m.lhs_memory,
                "layout": layout,
                "count": m.count,
                "flopsText": si(m.flops, "FLOP"),
                "exact": m.exact,
                "line": _line(m.location, kernel),
            }
        )
    return rows


def _pipelines(plan: MosaicGpuPlan, kernel: Kernel) -> list[PipelineRow]:
    allocations = {a.label: a for a in plan.smem.walk()}
    rows: list[PipelineRow] = []
    for index, p in enumerate(plan.pipelines):
        buffers: list[PipelineBuffer] = []
        for k, operand in enumerate(p.operands):
            label = kernel.operands[operand].label if 0 <= operand < len(kernel.operands) else "?"
            owned = [a for a in plan.smem.walk() if a.pipeline == index and a.kind == "buffer"]
            buffer = next(
                (a for a in owned if a.label == f"pipeline buffer of {label}"),
                allocations.get(p.buffers[k]) if k < len(p.buffers) else None,
            )
            window = buffer.shape[1:] if buffer is not None else ()
            buffers.append(
                {
                    "operand": label,
                    "window": _array(buffer.dtype, window) if buffer is not None else "",
                    "transforms": transforms_text(buffer.transforms) if buffer else "",
                    "bytesText": words.nbytes(buffer.nbytes) if buffer else "",
                }
            )
        rows.append(
            {
                "index": index,
                "kind": p.kind,
                "slots": p.slots,
                "steps": p.steps,
                "runs": p.runs,
                "buffers": buffers,
                "line": _line(p.location, kernel),
            }
        )
    return rows


def _persistent(plan: MosaicGpuPlan, kernel: Kernel) -> str:
    loop = plan.persistent
    if loop is None:
        return ""
    at = _line(loop.location, kernel)
    spread = (
        f"{loop.least} each" if loop.least == loop.most else f"{loop.least} to {loop.most} per CTA"
    )
    return (
        f"Persistent: {plan.ctas:,} CTAs loop over {loop.items:,} work items ({spread})"
        + (f", at {at}" if at else "")
        + "."
    )


def mosaic_json(
    plan: MosaicGpuPlan, budget: SmemBudget, kernel: Kernel, *, copy_map: bool
) -> MosaicGpuModel:
    """The Mosaic GPU part of a kernel's Tiles tab."""
    copies = _copies(plan, kernel)
    mmas = _mmas(plan, kernel)
    pipelines = _pipelines(plan, kernel)
    return {
        "ctas": plan.ctas,
        "grid": list(plan.grid),
        "axisNames": list(plan.axis_names),
        "threads": plan.threads,
        "steps": copy_steps(plan),
        "copyMap": copy_map,
        "smem": smem_json(budget, plan, kernel),
        "copies": copies,
        "copiesMissing": ""
        if copies
        else "No copy, load or store reaches GMEM from this kernel's body.",
        "mmas": mmas,
        "mmasMissing": "" if mmas else "No matrix product (wgmma, tcgen05_mma or dot).",
        "pipelines": pipelines,
        "pipelinesMissing": ""
        if pipelines
        else "No pipeline: the kernel issues its copies itself (plgpu.emit_pipeline makes one).",
        "work": {
            "flopsText": si(plan.flops, "FLOP"),
            "mmaFlopsText": si(plan.mma_flops, "FLOP"),
            "bytesText": words.nbytes(plan.gmem_bytes),
            "exact": plan.exact,
        },
        "persistent": _persistent(plan, kernel),
        "notices": list(plan.notices),
    }


def copy_order_text(plan: MosaicGpuPlan) -> str:
    """How the copy map's programs run, in words."""
    threads = (
        f" Each CTA runs {plan.threads} warpgroups; their copies are merged in order."
        if plan.threads > 1
        else ""
    )
    return (
        "Mosaic GPU: the CTAs run at once, one per SM as far as they go; within a CTA, "
        "step s is its s-th copy of each operand (a pipeline's steps, a loop's "
        f"iterations), in the order it issues them.{threads}"
    )


def copy_window_text(plan: MosaicGpuPlan, operand: int) -> str:
    """The windows an operand's copies move ("(128, 64) per copy"), or "" without any."""
    windows = sorted({c.window for c in plan.copies if c.operand == operand})
    if not windows:
        return ""
    shapes = ", ".join("(" + ", ".join(map(str, w)) + ")" for w in windows)
    return f"{shapes} per copy"
