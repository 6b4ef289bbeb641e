"""The figures of a diff: every number pallaslab knows of each side, paired.

What the kernels differ in (the tuning config, blocks, grid, compiler params), the
resources of each lowering (registers, spills, shared memory, occupancy, VMEM,
bundles), tile figures of merit (HBM traffic, working set, reuse), the check of each
run and timings: each a `Delta` of `records/diffs.py`. `core/diffing.py` aligns the
texts and gathers these into one `Diff`.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any

from pallaslab._src.base import sources, textdiff
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.geometry.merit import Chip, KernelMerit, on_chip
from pallaslab._src.records import Kernel, Operand, RunResult, hardware, short_dtype
from pallaslab._src.records.diffs import Delta, Value
from pallaslab._src.records.indexmap import renamed, same_structure
from pallaslab._src.records.lowered import GpuResources, Lowered, TpuResources
from pallaslab._src.records.targets import DEFAULT_GPU_ARCH, GPU_ARCHS, parse_target

_CPU_NOTE = "CPU emulation: not representative of GPU/TPU speed"


# ---------------------------------------------------------------------------
# What the kernels differ in.


def config_deltas(
    a: tuple[Inspection, Kernel],
    b: tuple[Inspection, Kernel],
    configs: tuple[Mapping[str, Any], Mapping[str, Any]] | None,
    timings: tuple[Any, Any] | None,
) -> list[Delta]:
    if configs is None and timings is not None:
        found = tuple(getattr(t, "config", None) for t in timings)
        if all(isinstance(c, Mapping) and c for c in found):
            configs = found  # type: ignore[assignment]
    if configs is not None:
        before, after = configs
        names = [*after, *(n for n in before if n not in after)]
        return [
            Delta("config", name, _plain(before.get(name)), _plain(after.get(name)))
            for name in names
        ]
    return [
        Delta("config", name, _plain(old), _plain(new))
        for name, old, new in changed_cell_constants(a, b)
    ]


def changed_cell_constants(
    a: tuple[Inspection, Kernel], b: tuple[Inspection, Kernel]
) -> list[tuple[str, object, object]]:
    """The `NAME = value` lines that differ between the files two kernels come from.

    Two versions of a notebook cell are two files: their top-level constants that
    changed (BLOCK_K = 32 -> 64) are the knobs the user turned. Kernels from one
    file give nothing here. Each file is read as its inspection traced it.
    """
    (inspection_a, ka), (inspection_b, kb) = a, b
    if ka.source is None or kb.source is None or ka.source.file == kb.source.file:
        return []
    return textdiff.changed_constants(
        sources.python_text(ka.source.file, inspection_a.source_lines(ka.source.file)),
        sources.python_text(kb.source.file, inspection_b.source_lines(kb.source.file)),
    )


def kernel_deltas(a: Kernel, b: Kernel, target_a: str, target_b: str) -> list[Delta]:
    deltas = [
        Delta("kernel", "kernel", a.name, b.name),
        Delta("kernel", "target", target_a, target_b),
        Delta("kernel", "grid", _shape(a.grid), _shape(b.grid)),
    ]
    if len(a.operands) != len(b.operands):
        deltas.append(Delta("kernel", "operands", len(a.operands), len(b.operands)))
    for oa, ob in zip(a.operands, b.operands, strict=False):
        label = ob.label if oa.label == ob.label else f"{oa.label}/{ob.label}"
        deltas.append(Delta("kernel", f"array {label}", _array(oa), _array(ob)))
        if oa.role != "scratch" or ob.role != "scratch":
            deltas.append(
                Delta("kernel", f"block {label}", _shape(oa.block_shape), _shape(ob.block_shape))
            )
            deltas.append(Delta("kernel", f"index map {label}", *index_map_texts(oa, ob)))
        deltas.append(Delta("kernel", f"memory {label}", oa.memory_space, ob.memory_space))
    params_a, params_b = dict(a.compiler_params), dict(b.compiler_params)
    deltas.extend(
        Delta("kernel", name, _literal(params_a.get(name)), _literal(params_b.get(name)))
        for name in [*params_b, *(n for n in params_a if n not in params_b)]
    )
    semantics = [", ".join(k.dimension_semantics or ()) or None for k in (a, b)]
    deltas.append(Delta("kernel", "dimension semantics", semantics[0], semantics[1]))
    return deltas


def index_map_texts(a: Operand, b: Operand) -> tuple[str | None, str | None]:
    """Two operands' index maps as text, equal when they compute the same blocks.

    Compared as expressions (`lambda i, j: (i, 0)` is `lambda m, n: (m, 0)`); when
    they differ, a's is written with b's parameter names, so the change reads as
    the one expression that changed: `(0, i)` → `(0, j)`.
    """
    ma, mb = a.index_map, b.index_map
    if ma is None or mb is None:
        return (None if ma is None else ma.text), (None if mb is None else mb.text)
    if same_structure(ma, mb):
        return mb.text, mb.text
    return renamed(ma, mb.arg_names), mb.text


def _shape(dims: Sequence[int | None]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def _array(operand: Any) -> str:

    return f"{short_dtype(operand.dtype)}[{','.join(map(str, operand.shape))}]"


def _literal(text: str | None) -> Value:
    if text is None:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value)


def _plain(value: Any) -> Value:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


# ---------------------------------------------------------------------------
# Resources of the lowering.


def resources_of(
    inspection: Inspection,
    kernel: Kernel,
    lowered: Lowered,
    *,
    chip: Chip,
    compile_more: bool,
    notes: list[str],
) -> GpuResources | TpuResources | None:
    """The lowering's resources; for Triton IR, those of a PTX compile for the chip."""
    if lowered.resources is not None:
        return lowered.resources
    target = parse_target(lowered.target)
    if target.kind != "triton":
        return None
    arch = chip.arch if isinstance(chip, hardware.Gpu) else DEFAULT_GPU_ARCH
    arch = arch if arch in GPU_ARCHS else DEFAULT_GPU_ARCH
    for done in inspection.lowerings():  # a compile the user already asked for
        resources = done.resources
        same_kernel = done.kernel_index == kernel.index
        if same_kernel and isinstance(resources, GpuResources) and resources.arch == arch:
            return resources
    if not compile_more:
        return None
    if importlib.util.find_spec("triton") is None:
        notes.append(
            "Registers, spills, shared memory and occupancy need a PTX compile: install "
            "the triton package (pallaslab[triton]) or diff a GPU target where it is."
        )
        return None
    compiled = inspection.lower(f"ptx:{arch}", kernel.index)
    if compiled.error is not None:
        notes.append(f"{kernel.name}: no PTX for {arch}: {compiled.error.message}")
        return None
    return compiled.resources


def _paired(group: str, name: str, a: Any, b: Any, read: Any, **options: Any) -> Delta:
    """A figure read from both sides (None for a side that has none)."""
    return Delta(
        group,
        name,
        None if a is None else read(a),
        None if b is None else read(b),
        **options,
    )


def resource_deltas(
    a: GpuResources | TpuResources | None,
    b: GpuResources | TpuResources | None,
    chip_a: Chip,
    chip_b: Chip,
) -> list[Delta]:
    deltas: list[Delta] = []
    gpu_a = a if isinstance(a, GpuResources) else None
    gpu_b = b if isinstance(b, GpuResources) else None
    if gpu_a or gpu_b:
        occupancy = (_occupancy(gpu_a, chip_a), _occupancy(gpu_b, chip_b))
        where = sorted({o.gpu for o in occupancy if o is not None})
        lower, key = {"better": "lower"}, {"better": "lower", "headline": True}
        deltas += [
            _paired(
                "resources",
                "registers per thread",
                gpu_a,
                gpu_b,
                lambda r: r.registers_per_thread,
                **key,
            ),
            _paired(
                "resources",
                "spill stores",
                gpu_a,
                gpu_b,
                lambda r: r.spill_store_bytes,
                unit="B",
                **key,
            ),
            _paired(
                "resources",
                "spill loads",
                gpu_a,
                gpu_b,
                lambda r: r.spill_load_bytes,
                unit="B",
                **lower,
            ),
            _paired(
                "resources",
                "shared memory",
                gpu_a,
                gpu_b,
                lambda r: r.shared_bytes,
                unit="B",
                **key,
            ),
            _paired("resources", "warps per block", gpu_a, gpu_b, lambda r: r.num_warps),
            _paired("resources", "pipeline stages", gpu_a, gpu_b, lambda r: r.num_stages),
            _paired(
                "resources",
                f"occupancy on {'/'.join(where)}" if where else "occupancy",
                *occupancy,
                lambda o: round(100 * o.fraction, 1),
                unit="%",
                better="higher",
                headline=True,
            ),
            _paired("resources", "occupancy limited by", *occupancy, lambda o: o.limiter),
        ]
    tpu_a = a if isinstance(a, TpuResources) else None
    tpu_b = b if isinstance(b, TpuResources) else None
    if tpu_a or tpu_b:
        key = {"better": "lower", "headline": True}
        deltas += [
            _paired("resources", "VMEM", tpu_a, tpu_b, lambda r: r.vmem_bytes, unit="B", **key),
            _paired(
                "resources",
                "tiling problems",
                tpu_a,
                tpu_b,
                lambda r: len(r.tiling_problems),
                **key,
            ),
            _paired("resources", "bundles", tpu_a, tpu_b, lambda r: r.bundles, **key),
            _paired(
                "resources",
                "bundles per grid step",
                tpu_a,
                tpu_b,
                lambda r: r.loop_body_bundles,
                **key,
            ),
            _paired(
                "resources",
                "code size",
                tpu_a,
                tpu_b,
                lambda r: r.code_bytes,
                unit="B",
                better="lower",
            ),
        ]
    return deltas


def _occupancy(resources: GpuResources | None, chip: Chip) -> Any:
    if resources is None or not resources.occupancy:
        return None
    wanted = chip.name if isinstance(chip, hardware.Gpu) else "H100"
    for row in resources.occupancy:
        if row.gpu == wanted:
            return row
    return next((r for r in resources.occupancy if r.same_arch), resources.occupancy[0])


# ---------------------------------------------------------------------------
# Tile figures of merit, checks, timings.


def _merit(inspection: Inspection, kernel: Kernel, notes: list[str]) -> KernelMerit | None:
    try:
        return inspection.merit(kernel.index)  # a Mosaic GPU kernel's from its plan
    except (ValueError, IndexError, KeyError) as error:
        notes.append(f"{kernel.name}: no tile figures: {error}")
        return None


def tile_deltas(
    a: tuple[Inspection, Kernel, Chip],
    b: tuple[Inspection, Kernel, Chip],
    notes: list[str],
) -> list[Delta]:
    (inspection_a, ka, chip_a), (inspection_b, kb, chip_b) = a, b
    ma, mb = _merit(inspection_a, ka, notes), _merit(inspection_b, kb, notes)
    if ma is None and mb is None:
        return []
    lower, key = {"better": "lower"}, {"better": "lower", "headline": True}
    deltas = [
        _paired("tiles", "programs", ma, mb, lambda m: m.programs),
        _paired("tiles", "HBM traffic", ma, mb, lambda m: m.hbm_bytes, unit="B", **key),
        _paired(
            "tiles",
            "traffic over minimum",
            ma,
            mb,
            lambda m: round(m.traffic_ratio, 3),
            unit="x",
            **lower,
        ),
    ]
    operands_a = {o.label: o for o in (ma.operands if ma else ())}
    for operand in mb.operands if mb else ():
        before = operands_a.get(operand.label)
        if operand.access != "pipelined" and (before is None or before.access != "pipelined"):
            continue
        deltas += [
            _paired(
                "tiles",
                f"HBM traffic {operand.label}",
                before,
                operand,
                lambda o: o.hbm_bytes,
                unit="B",
                **lower,
            ),
            _paired(
                "tiles",
                f"reads per element {operand.label}",
                before,
                operand,
                lambda o: round(o.reads_mean, 3),
                **lower,
            ),
        ]
    fits = (
        None if ma is None else on_chip(ma, chip_a),
        None if mb is None else on_chip(mb, chip_b),
    )
    capacity = next((f.capacity_name for f in fits if f is not None), "on-chip memory")
    return [
        *deltas,
        _paired(
            "tiles", "working set", ma, mb, lambda m: m.working_set_bytes, unit="B", headline=True
        ),
        _paired(
            "tiles", f"fits in {capacity}", *fits, lambda f: f.fits, better="higher", headline=True
        ),
        _paired(
            "tiles",
            "arithmetic intensity",
            ma,
            mb,
            lambda m: _rounded(m.arithmetic_intensity),
            unit="FLOP/B",
            better="higher",
        ),
    ]


def _rounded(value: Value) -> Value:
    return round(value, 3) if isinstance(value, float) else value


def _verdict(result: RunResult) -> str:
    if result.comparison is None:
        return "not checked"
    return "matches" if result.comparison.ok else "differs"


def check_deltas(a: Inspection, b: Inspection) -> list[Delta]:
    if a.result is None and b.result is None:
        return []
    results = (a.result, b.result)
    key = {"better": "lower", "headline": True}
    check = _paired(
        "check", "check", *results, _verdict, headline=True, good="matches", bad="differs"
    )
    return [
        dataclasses.replace(check, a=check.a or "not run", b=check.b or "not run"),
        _paired(
            "check",
            "max abs error",
            *results,
            lambda r: None if r.comparison is None else float(r.comparison.max_abs_err),
            better="lower",
        ),
        _paired("check", "padding leaks", *results, lambda r: len(r.leaks), **key),
        _paired(
            "check",
            "races confirmed",
            *results,
            lambda r: sum(c.confirmed for c in r.race_checks),
            **key,
        ),
        _paired("check", "ran as", *results, lambda r: r.mode),
    ]


def timing_deltas(timings: tuple[Any, Any] | None) -> list[Delta]:
    if timings is None:
        return []
    values = [_milliseconds(t) for t in timings]
    labelled = [str(getattr(t, "note", "") or "") for t in timings]
    backends = [str(getattr(t, "backend", "") or "") for t in timings]
    note = ""
    if any(labelled) or "cpu" in backends:
        note = next((n for n in labelled if n), _CPU_NOTE)
    return [
        Delta(
            "timing",
            "time",
            values[0],
            values[1],
            unit="ms",
            better="lower",
            note=note,
            headline=True,
        )
    ]


def _milliseconds(timing: Any) -> float | None:
    if timing is None:
        return None
    if isinstance(timing, int | float):
        return float(timing)
    median = getattr(timing, "median_ms", None)
    if median is None:
        raise TypeError(
            f"a timing is a pallaslab.measure(...) result, a row with median_ms, or "
            f"milliseconds; not a {type(timing).__name__}"
        )
    return float(median)
