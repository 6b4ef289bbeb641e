"""A Mosaic GPU `pallas_call`'s plan: its BlockSpecs pipelined, its body walked.

Mosaic GPU's lowering of a `pallas_call` (`lower_pipelined_jaxpr_to_module`) runs
`emit_pipeline` over the grid axes that are not "parallel", with
`max_concurrent_steps` buffers per operand in SMEM (fewer when there are fewer
steps) and one barrier per slot when an input is pipelined, around the scratch
shapes. The same is laid out here, and the body walked over the whole grid.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pallaslab._src.core.jax_adapter.kernels import KernelSite
from pallaslab._src.core.jax_adapter.mosaic_gpu import refs
from pallaslab._src.core.jax_adapter.mosaic_gpu.plan import (
    BARRIER_BYTES,
    Allocations,
    allocation_record,
    assemble,
    scopes_of,
    walk,
)
from pallaslab._src.core.jax_adapter.mosaic_gpu.walker import Buffer
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr
from pallaslab._src.records import Kernel, SourceLocation
from pallaslab._src.records.mosaic_gpu import GpuPipeline, MosaicGpuPlan, SmemAllocation, SmemScope


def pallas_call_plan(site: KernelSite, kernel: Kernel) -> MosaicGpuPlan:
    """A Mosaic GPU `pallas_call`: its BlockSpecs pipelined over the sequential axes.

    Mosaic GPU's lowering runs `emit_pipeline` over the grid axes that are not
    "parallel" (all are, by default), with `max_concurrent_steps` buffers per operand
    in SMEM, and allocates the scratch shapes; the body is walked over the whole grid.
    """
    params = site.params
    compiler_params = params.get("compiler_params")
    grid_mapping = params["grid_mapping"]
    body = inner_jaxpr(params["jaxpr"])
    grid = tuple(int(d) for d in kernel.grid)
    semantics = getattr(compiler_params, "dimension_semantics", None)
    parallel = [
        semantics is None or str(getattr(s, "value", s)).rsplit(".", 1)[-1].lower() == "parallel"
        for s in (semantics or [None] * len(grid))
    ]
    sequential = math.prod(d for d, p in zip(grid, parallel, strict=True) if not p)
    requested = int(getattr(compiler_params, "max_concurrent_steps", 1) or 1)
    slots = max(1, min(requested, sequential))
    found = Allocations()
    pipelined: list[SmemAllocation] = []
    operand_of: list[int] = []
    for k, mapping in enumerate(grid_mapping.block_mappings):
        stored_aval: Any = mapping.transformed_block_aval
        if refs.memory_space(stored_aval) not in ("default", "smem"):
            continue  # left in GMEM: the body copies what it needs
        operand = kernel.num_scalar_prefetch + k
        block = kernel.operands[operand]
        stored = (slots, *tuple(int(n) for n in stored_aval.shape))
        pipelined.append(
            SmemAllocation(
                label=f"pipeline buffer of {block.label}",
                kind="buffer",
                shape=(slots, *tuple(1 if b is None else b for b in block.block_shape)),
                stored_shape=stored,
                dtype=block.dtype,
                transforms=refs.written_transforms(tuple(getattr(mapping, "transforms", ()))),
                nbytes=math.prod(stored) * refs.itemsize(stored_aval),
                pipeline=0,
                location=block.blockspec_location,
            )
        )
        operand_of.append(operand)
    inputs_in_smem = sum(1 for o in operand_of if kernel.operands[o].role == "in")
    if inputs_in_smem:
        pipelined.append(
            SmemAllocation(
                label="pipeline barriers",
                kind="barrier",
                shape=(slots,),
                stored_shape=(slots,),
                dtype="barrier",
                nbytes=BARRIER_BYTES * slots,
                count=slots,
                arrivals=inputs_in_smem,
                pipeline=0,
            )
        )
    num_scratch = len(grid_mapping.scratch_avals)
    scratch_vars = list(body.invars[len(body.invars) - num_scratch :]) if num_scratch else []
    scratch: list[SmemAllocation] = []
    for position, var in enumerate(scratch_vars):
        operand = len(kernel.operands) - num_scratch + position
        label = kernel.operands[operand].label if 0 <= operand < len(kernel.operands) else ""
        record = allocation_record(var, (), label or f"scratch[{position}]", kernel.source)
        found.by_var[id(var)] = len(found.records)
        found.records.append(record)
        scratch.append(record)
    inner = tuple(scopes_of(body, found))
    top = SmemScope(
        (),
        (SmemScope((*pipelined, *scratch), inner, kernel.call_site),),
        kernel.source,
    )
    axes = [(f"#{a}", n) for a, n in enumerate(grid)]
    buffers = []
    for position, var in enumerate(body.invars):
        operand = position
        space = refs.memory_space(var.aval)
        if position >= len(body.invars) - num_scratch:
            index = found.by_var.get(id(var))
            buffers.append(Buffer(space, None, index, var.aval))
        else:
            # Blocks in SMEM are the pipeline's; GMEM (and ANY) operands are whole arrays.
            space = "smem" if space == "default" else space
            buffers.append(Buffer(space, operand if space == "gmem" else None, None, var.aval))
    recorder = walk(body, axes, buffers, found)
    ctas = tuple(d for d, p in zip(grid, parallel, strict=True) if p) or (1,)
    pipeline = GpuPipeline(
        kind="pallas_call",
        slots=slots,
        steps=int(sequential),
        runs=1.0,
        buffers=tuple(a.label for a in pipelined if a.kind == "buffer"),
        operands=tuple(operand_of),
        location=kernel.call_site or _first_blockspec(kernel) or kernel.source,
    )
    plan = assemble(
        kernel,
        ctas=ctas,
        axis_names=tuple(f"#{a}" for a, p in enumerate(parallel) if p),
        threads=1,
        smem=top,
        found=found,
        recorder=recorder,
        compiler_params=compiler_params,
        extra_pipelines=(pipeline,) if pipelined else (),
    )
    # The body ran once per grid point, sequential ones included: no per-CTA order.
    return dataclasses.replace(plan, windows=())


def _first_blockspec(kernel: Kernel) -> SourceLocation | None:
    return next(
        (o.blockspec_location for o in kernel.operands if o.blockspec_location is not None), None
    )
