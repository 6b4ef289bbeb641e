"""A Mosaic GPU kernel's `MosaicGpuPlan`: its allocations read statically, the rest walked.

The SMEM scopes come from the body's `run_scoped` equations (and a `pallas_call`'s
scratch and pipelined blocks), as Mosaic GPU's own resource estimate reads them.
Copies, products, pipelines and persistent loops come from walking the body for every
CTA and warpgroup of the grid (`walker`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.kernels import KernelSite, mesh_of, user_location
from pallaslab._src.core.jax_adapter.mosaic_gpu import control, events, refs
from pallaslab._src.core.jax_adapter.mosaic_gpu.walker import (
    Buffer,
    OutOfBudgetError,
    Recorder,
    Ref,
    Walker,
    pipeline_kind,
)
from pallaslab._src.core.jax_adapter.probes import jax_core
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr, scoped_refs
from pallaslab._src.records import Kernel
from pallaslab._src.records.mosaic_gpu import (
    CopySite,
    CopyWindows,
    GpuPipeline,
    MmaSite,
    MosaicGpuPlan,
    PersistentLoop,
    SmemAllocation,
    SmemScope,
)

# Per-CTA copy sequences kept at most (CTAs x steps, per operand): beyond, no windows.
MAX_WINDOW_ENTRIES = 1 << 22
# Programs (CTAs x warpgroups) followed at most: each value is an array over them.
MAX_PROGRAMS = 1 << 20
_ = (control, events)  # their handlers register with the walker on import

BARRIER_BYTES = 8  # one mbarrier


@dataclasses.dataclass
class Allocations:
    """Every allocation of a body, numbered in the order a static walk meets them."""

    records: list[SmemAllocation] = dataclasses.field(default_factory=list)
    by_var: dict[int, int] = dataclasses.field(default_factory=dict)
    # Allocations a pipeline helper made itself (its barriers): index -> its pipeline key.
    pipeline_made: dict[int, tuple[Any, ...]] = dataclasses.field(default_factory=dict)


def allocation_record(
    var: Any, transforms: Sequence[Any], label: str, where: Any
) -> SmemAllocation:
    aval = var.aval
    inner = getattr(aval, "inner_aval", aval)
    shape = tuple(int(n) for n in getattr(inner, "shape", ()))
    dtype: Any = getattr(inner, "dtype", None)
    space = refs.memory_space(aval)
    if hasattr(dtype, "num_arrivals"):  # a barrier array
        count = math.prod(shape)
        return SmemAllocation(
            label=label,
            kind="barrier",
            shape=shape,
            stored_shape=shape,
            dtype=str(getattr(dtype, "name", "barrier")),
            nbytes=BARRIER_BYTES * count,
            count=count,
            arrivals=int(dtype.num_arrivals),
            orders_tensor_core=bool(getattr(dtype, "orders_tensor_core", False)),
            location=where,
        )
    logical = refs.logical_shape(aval, transforms) or shape
    kind = {"tmem": "tmem", "regs": "registers"}.get(space, "buffer")
    if type(aval).__name__.startswith("WGMMA"):
        kind = "registers"
    return SmemAllocation(
        label=label,
        kind=kind,  # type: ignore[arg-type]
        shape=logical,
        stored_shape=shape,
        dtype=refs.dtype_name(aval),
        transforms=refs.written_transforms(transforms),
        nbytes=math.prod(shape) * refs.itemsize(aval) if kind == "buffer" else 0,
        location=where,
    )


def scopes_of(jaxpr: Any, found: Allocations) -> list[SmemScope]:
    """The scopes a jaxpr opens, at any depth, each with the scopes inside it."""
    scopes: list[SmemScope] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "run_scoped":
            body = inner_jaxpr(eqn.params["jaxpr"])
            _, allocated = scoped_refs(eqn)
            names = list(getattr(getattr(body, "debug_info", None), "arg_names", None) or ())
            names = names[-len(allocated) :] if len(names) >= len(allocated) else []
            transforms = list(eqn.params.get("ref_transforms") or ())
            where = user_location(eqn.source_info)
            helper = pipeline_kind(eqn)
            made = []
            for position, var in enumerate(allocated):
                label = names[position] if position < len(names) and names[position] else ""
                chosen = transforms[position] if position < len(transforms) else ()
                label = label or f"scoped[{position}]"
                record = allocation_record(var, chosen or (), label, where)
                found.by_var[id(var)] = len(found.records)
                if helper is not None:
                    found.pipeline_made[len(found.records)] = (where, helper)
                if record.kind == "barrier" and (helper is not None or "_barrier_ref" in label):
                    # A pipeline's own barriers (made by it, or by `get_allocations`).
                    waits_for = "slots consumed" if "consumed" in label else "copies landed"
                    record = dataclasses.replace(record, label=f"pipeline barriers: {waits_for}")
                found.records.append(record)
                made.append(len(found.records) - 1)
            scopes.append(
                SmemScope(
                    tuple(found.records[k] for k in made), tuple(scopes_of(body, found)), where
                )
            )
            continue
        for sub in jax_core.jaxprs_in_params(eqn.params):
            scopes += scopes_of(inner_jaxpr(sub), found)
    return scopes


def _mesh_body(site: KernelSite) -> Any:
    params = site.params
    return params["jaxprs"][0] if "jaxprs" in params else params["jaxpr"]


def mesh_plan(site: KernelSite, kernel: Kernel) -> MosaicGpuPlan:
    """A mesh kernel's plan (`plgpu.kernel`, `pl.kernel` on a GPU mesh)."""
    mesh = mesh_of(site.params)
    body = _mesh_body(site)
    grid = tuple(int(d) for d in getattr(mesh, "grid", ()) or ())
    names = tuple(str(n) for n in getattr(mesh, "grid_names", ()) or ())
    cluster = tuple(int(d) for d in getattr(mesh, "cluster", ()) or ())
    cluster_names = tuple(str(n) for n in getattr(mesh, "cluster_names", ()) or ())
    threads = int(getattr(mesh, "num_threads", None) or 1)
    thread_name = getattr(mesh, "thread_name", None)
    axes = [*zip(names, grid, strict=False), *zip(cluster_names, cluster, strict=False)]
    if len(names) < len(grid):
        axes = [(n or f"#{k}", d) for k, (n, d) in enumerate(zip(names, grid, strict=False))]
    if thread_name is not None:
        axes.append((str(thread_name), threads))
    found = Allocations()
    jaxpr = inner_jaxpr(body)
    top = SmemScope((), tuple(scopes_of(jaxpr, found)), kernel.source)
    # `pl.kernel` / `plgpu.kernel` take the operands as the body's inputs; `pl.core_map`
    # closes over them (its constvars, in the kernel record's order).
    closed_over = site.primitive == "core_map"
    operands = jaxpr.constvars if closed_over else jaxpr.invars
    buffers = [Buffer("gmem", position, None, var.aval) for position, var in enumerate(operands)]
    recorder = walk(body, axes, buffers, found, closed_over=closed_over)
    ctas = (*grid, *cluster) or (1,)
    return assemble(
        kernel,
        ctas=ctas,
        axis_names=tuple(n for n, _ in axes[: len(ctas)]),
        threads=threads if thread_name is not None else 1,
        smem=top,
        found=found,
        recorder=recorder,
        compiler_params=site.params.get("compiler_params"),
    )


def walk(
    body: Any,
    axes: list[tuple[str, int]],
    buffers: list[Buffer],
    found: Allocations,
    *,
    closed_over: bool = False,
) -> Recorder:
    """Walks a kernel body over the product of `axes` (the last varies fastest).

    The body's inputs are `buffers`, first to last; `closed_over`: its constvars are
    (`pl.core_map`), else its invars (and constvars are its constants).
    """
    jaxpr = inner_jaxpr(body)
    sizes = {name: int(size) for name, size in axes}
    programs = math.prod(sizes.values()) if sizes else 1
    if programs > MAX_PROGRAMS:
        raise ValueError(
            f"its grid runs {programs:,} programs (CTAs x warpgroups); pallaslab follows "
            f"Mosaic GPU kernels of up to {MAX_PROGRAMS:,}"
        )
    shape = tuple(n for _, n in axes)
    indices = np.unravel_index(np.arange(programs, dtype=np.int64), shape) if shape else ()
    walker = Walker(
        programs,
        {name: indices[k].astype(np.int64) for k, (name, _) in enumerate(axes)},
        sizes,
        buffers,
        found.by_var,
    )
    refs_ = [Ref(k) for k in range(len(buffers))]
    try:
        if closed_over:
            inputs = [*refs_, *([None] * len(jaxpr.invars))]
            walker.run(jaxpr, inputs, np.ones(programs, bool), open_jaxpr=True)
        else:
            inputs = refs_ + [None] * (len(jaxpr.invars) - len(refs_))
            walker.run(body, inputs, np.ones(programs, bool))
    except OutOfBudgetError:
        walker.found.inexact(
            "The kernel's loops take more steps than pallaslab follows: counts are partial."
        )
    return walker.found


def assemble(
    kernel: Kernel,
    *,
    ctas: tuple[int, ...],
    axis_names: tuple[str, ...],
    threads: int,
    smem: SmemScope,
    found: Allocations,
    recorder: Recorder,
    compiler_params: Any,
    extra_pipelines: Sequence[GpuPipeline] = (),
) -> MosaicGpuPlan:
    allocations = found.records
    pipelines, pipeline_of = _pipelines(recorder, allocations)
    labels = _pipeline_labels(allocations, pipelines, kernel)
    copies = _merged_copies(
        CopySite(
            kind=c.kind,  # type: ignore[arg-type]
            operand=c.operand,
            smem=labels.get(c.smem, "") if c.smem is not None else "",
            window=c.window,
            dtype=c.dtype,
            bytes_each=c.bytes_each,
            copies=c.copies,
            exact=c.exact,
            multicast=c.multicast,
            pipeline=pipeline_of.get(c.pipeline) if c.pipeline is not None else None,
            location=c.location,
        )
        for c in recorder.copies.values()
    )
    mmas = tuple(
        MmaSite(
            kind=m.kind,  # type: ignore[arg-type]
            m=m.m,
            n=m.n,
            k=m.k,
            lhs_dtype=m.lhs_dtype,
            rhs_dtype=m.rhs_dtype,
            acc_dtype=m.acc_dtype,
            lhs_memory=m.lhs_memory,
            lhs_transforms=m.lhs_transforms,
            rhs_transforms=m.rhs_transforms,
            collective=m.collective,
            count=m.count,
            exact=m.exact and recorder.exact,
            location=m.location,
        )
        for m in recorder.mmas.values()
    )
    relabelled = _relabelled(
        smem, labels, allocations, pipeline_of, recorder=recorder, made_by=found.pipeline_made
    )
    reduction = int(getattr(compiler_params, "reduction_scratch_bytes", 0) or 0)
    return MosaicGpuPlan(
        kernel=kernel.name,
        grid=ctas,
        axis_names=axis_names,
        threads=threads,
        smem=relabelled,
        copies=copies,
        mmas=mmas,
        pipelines=(*extra_pipelines, *pipelines),
        windows=_windows(recorder, math.prod(ctas), threads),
        flops=recorder.flops,
        transcendentals=recorder.transcendentals,
        exact=recorder.exact,
        persistent=_persistent(recorder, ctas, threads, axis_names),
        reduction_scratch_bytes=reduction if recorder.reductions else 0,
        notices=tuple(recorder.notices),
    )


def _pipelines(
    recorder: Recorder, allocations: list[SmemAllocation]
) -> tuple[list[GpuPipeline], dict[Any, int]]:
    """One `GpuPipeline` per pipeline call the walk entered.

    A run of a pipeline runs each of its first equations once: per program, its runs
    are the most any of them ran. Its steps per run are the copies into one of its
    buffers over the runs of the programs that made them.
    """
    found: list[GpuPipeline] = []
    index: dict[Any, int] = {}
    for key, entries in recorder.pipeline_runs.items():
        where, kind = key
        runs = np.max(np.stack(list(entries.values())), axis=0)
        buffers = recorder.pipeline_buffers.get(key, {})
        steps = 0.0
        for counts in buffers.values():
            copiers = counts > 0
            if copiers.any():
                steps = max(steps, counts.sum() / max(1, runs[copiers].sum()))
        entered = runs[runs > 0]
        operands = tuple(
            next((r.operand for r in recorder.copies.values() if r.smem == b), -1) for b in buffers
        )
        index[key] = len(found)
        found.append(
            GpuPipeline(
                kind=kind,
                slots=max((allocations[b].stored_shape[0] for b in buffers), default=0),
                steps=round(steps),
                runs=round(float(entered.mean()), 3) if entered.size else 0.0,
                buffers=tuple(str(b) for b in buffers),
                operands=operands,
                location=where,
            )
        )
    return found, index


def _merged_copies(sites: Any) -> tuple[CopySite, ...]:
    """Copy lines merged when they are one line of source (a pipeline's prologue and loop)."""
    merged: dict[tuple[Any, ...], CopySite] = {}
    for site in sites:
        key = (site.kind, site.operand, site.smem, site.window, site.location, site.pipeline)
        before = merged.get(key)
        merged[key] = (
            site
            if before is None
            else dataclasses.replace(
                before, copies=before.copies + site.copies, exact=before.exact and site.exact
            )
        )
    return tuple(merged.values())


def _pipeline_labels(
    allocations: list[SmemAllocation], pipelines: list[GpuPipeline], kernel: Kernel
) -> dict[int, str]:
    """Each allocation's label; a pipeline's buffers named after the operand they hold."""
    labels = {k: a.label for k, a in enumerate(allocations)}
    for pipeline in pipelines:
        for buffer, operand in zip(pipeline.buffers, pipeline.operands, strict=True):
            name = kernel.operands[operand].label if 0 <= operand < len(kernel.operands) else "?"
            labels[int(buffer)] = f"pipeline buffer of {name}"
    return labels


def _relabelled(
    scope: SmemScope,
    labels: dict[int, str],
    allocations: list[SmemAllocation],
    pipeline_of: dict[Any, int],
    *,
    recorder: Recorder,
    made_by: dict[int, tuple[Any, ...]],
) -> SmemScope:
    """The scopes with pipeline buffers named and tied to their pipeline."""
    owner: dict[int, int] = {
        index: pipeline_of[key] for index, key in made_by.items() if key in pipeline_of
    }
    for key, buffers in recorder.pipeline_buffers.items():
        for buffer in buffers:
            owner[buffer] = pipeline_of[key]
    position = {id(a): k for k, a in enumerate(allocations)}

    def redo(s: SmemScope) -> SmemScope:
        def named(a: SmemAllocation) -> SmemAllocation:
            at = position.get(id(a))
            if at is None:  # laid out by pallaslab (a pallas_call's pipeline): as it is
                return a
            return dataclasses.replace(a, label=labels.get(at, a.label), pipeline=owner.get(at))

        return SmemScope(
            tuple(named(a) for a in s.allocations), tuple(redo(i) for i in s.inner), s.location
        )

    return redo(scope)


def _windows(recorder: Recorder, ctas: int, threads: int) -> tuple[CopyWindows, ...]:
    """Per operand and direction, each CTA's copies in order: where they land."""
    grouped: dict[tuple[int, str], list[Any]] = {}
    for event in recorder.windows:
        grouped.setdefault((event.operand, event.direction), []).append(event)
    found = []
    for (operand, direction), evs in sorted(grouped.items()):
        per_cta = np.zeros(ctas, np.int64)
        for event in evs:
            per_cta += event.mask.reshape(ctas, threads).sum(axis=1)
        steps = int(per_cta.max()) if per_cta.size else 0
        if not steps or ctas * steps > MAX_WINDOW_ENTRIES:
            continue
        rank = len(evs[0].sizes)
        if any(len(e.sizes) != rank for e in evs):
            continue
        sizes = tuple(max(e.sizes[d] for e in evs) for d in range(rank))
        starts = [np.zeros((ctas, steps), np.int64) for _ in range(rank)]
        lengths = [np.zeros((ctas, steps), np.int64) for _ in range(rank)]
        counter = np.zeros(ctas, np.int64)
        unknown = 0
        for event in evs:
            mask = event.mask.reshape(ctas, threads)
            for thread in range(threads):
                ran = mask[:, thread]
                if not ran.any():
                    continue
                where = np.nonzero(ran)[0]
                step = counter[where]
                if event.starts is None or any(s is None for s in event.starts):
                    unknown += int(where.size)
                else:
                    for d in range(rank):
                        value = np.broadcast_to(event.starts[d], (ctas * threads,))
                        starts[d][where, step] = value.reshape(ctas, threads)[where, thread]
                        lengths[d][where, step] = event.sizes[d]
                counter[where] += 1
        found.append(
            CopyWindows(
                operand=operand,
                direction=direction,  # type: ignore[arg-type]
                sizes=sizes,
                starts=tuple(starts),
                lengths=tuple(lengths),
                unknown=unknown,
            )
        )
    return tuple(found)


def _persistent(
    recorder: Recorder, ctas: tuple[int, ...], threads: int, names: tuple[str, ...]
) -> PersistentLoop | None:
    """The outermost loop whose trip count differs between CTAs (or an `nd_loop`)."""
    count = math.prod(ctas)
    for where, trips, _ in recorder.loops:
        per_cta = trips.reshape(count, threads).max(axis=1)
        return PersistentLoop(
            items=int(per_cta.sum()),
            least=int(per_cta.min()),
            most=int(per_cta.max()),
            axis=", ".join(names),
            location=where,
        )
    return None
