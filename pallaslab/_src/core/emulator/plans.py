"""Plans: which grid axes of a kernel the emulator batches, which it runs in order, and why.

Also the analysis cache (a kernel call and its plan, per kernel body) and the bound on
the grids the emulator (or Pallas' interpreter) runs program by program.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter.program_body import ProgramBody
from pallaslab._src.geometry import races as geometry
from pallaslab._src.geometry.blocks import program_starts
from pallaslab._src.geometry.limits import check_programs


@dataclasses.dataclass(frozen=True)
class Plan:
    """How the emulator runs one kernel.

    Attributes:
        kernel: The kernel's name.
        grid: Its grid.
        batched: Grid axes whose programs run as one batch.
        sequential: Grid axes run one step at a time, in grid order.
        reasons: For each sequential axis, why (same order as `sequential`).
        fallback: Why the kernel runs in an interpreter instead ("" if it does not).
        axis_names: Names of the grid axes, for messages.
        interpreter: The interpreter that runs it then: "pallas" (Pallas' own, or its
            TPU interpreter) or "mosaic_gpu" (JAX's Mosaic GPU interpreter).
        failure: When the fallback is no decision but the emulator's own failure to
            analyse the kernel, that failure ("" otherwise): pallaslab's bug, which
            `pytest --pallaslab` counts as such.
    """

    kernel: str
    grid: tuple[int, ...]
    batched: tuple[int, ...]
    sequential: tuple[int, ...]
    reasons: tuple[str, ...]
    fallback: str = ""
    axis_names: tuple[str, ...] = ()
    interpreter: str = "pallas"
    failure: str = ""

    @property
    def emulated(self) -> bool:
        """Whether the emulator runs this kernel."""
        return not self.fallback

    @property
    def steps(self) -> int:
        """Sequential steps: programs along the sequential axes."""
        return math.prod(self.grid[a] for a in self.sequential)

    @property
    def batch(self) -> int:
        """Programs run together in each step."""
        return math.prod(self.grid[a] for a in self.batched)

    def describe(self) -> str:
        """One line: how the kernel ran."""
        if self.fallback and self.interpreter == "mosaic_gpu":
            return f"{self.kernel}: ran in JAX's Mosaic GPU interpreter: {self.fallback}."
        if self.fallback:
            return (
                f"{self.kernel}: ran in Pallas' interpreter, one program at a time, "
                f"because {self.fallback}."
            )
        if not self.grid:
            return f"{self.kernel}: emulated (a single program)."
        parts = []
        if self.batched:
            parts.append(
                f"{self._axes(self.batched)} batched ({self.batch} program"
                f"{'s' if self.batch != 1 else ''} at once)"
            )
        if self.sequential:
            why = ", ".join(sorted(set(self.reasons), key=self.reasons.index))
            parts.append(f"{self._axes(self.sequential)} in order ({self.steps} steps: {why})")
        return f"{self.kernel}: emulated; " + "; ".join(parts) + "."

    def _axes(self, axes: Sequence[int]) -> str:
        names = [
            f"{a} ({self.axis_names[a]})"
            if a < len(self.axis_names) and not self.axis_names[a].startswith("axis")
            else str(a)
            for a in axes
        ]
        return ("axis " if len(names) == 1 else "axes ") + ", ".join(names)


def make_plan(call: adapter.KernelCall) -> Plan:
    """Decides, per grid axis, whether the emulator batches it or runs it in order."""
    record = call.record
    names = geometry.axis_names(record)
    if call.unsupported:
        return Plan(record.name, call.grid, (), (), (), call.unsupported, names)
    body = call.program
    reasons: dict[int, str] = {}
    for k, layout in enumerate(call.layouts):
        is_output = k >= call.num_inputs
        if not (is_output or body.written[k]):
            continue
        operand = record.operands[call.num_scalars + k]
        label = operand.label
        index_map = operand.index_map
        if index_map is None or not index_map.evaluable or index_map.uses_prefetch:
            why = (
                "reads scalar-prefetch values"
                if index_map is not None and index_map.uses_prefetch
                else "cannot be evaluated ahead of time"
            )
            for axis in range(len(call.grid)):
                reasons.setdefault(axis, f"the index map of {label} {why}")
            continue
        starts = clamped_starts(call, k)
        shared = geometry.sharing_axes(
            starts, call.grid, layout.block, aligned=not any(layout.element)
        )
        for axis, along in enumerate(shared):
            if along:
                reasons.setdefault(axis, f"its programs write the same blocks of {label}")
    if body.scratch_carries and call.scratch:
        parallel = geometry.parallel_axes(record, "tpu")
        for axis in range(len(call.grid)):
            if not parallel[axis]:
                reasons.setdefault(axis, "scratch buffers carry state from program to program")
        # A batched program gets a scratch buffer of its own. That matches running in
        # grid order only when each batched index's programs come one after another,
        # i.e. the axis lies outside every axis that runs in order: inside one, all its
        # programs share one buffer between steps (row-major order).
        for axis in range(len(call.grid)):
            outer = [a for a in range(axis) if a in reasons]
            if outer and axis not in reasons:
                reasons[axis] = (
                    f"its programs share one scratch buffer between steps of axis {outer[0]} "
                    "(outside it, run in order)"
                )
    sequential = tuple(a for a in range(len(call.grid)) if a in reasons)
    batched = tuple(a for a in range(len(call.grid)) if a not in reasons)
    return Plan(
        record.name,
        call.grid,
        batched,
        sequential,
        tuple(reasons[a] for a in sequential),
        "",
        names,
    )


def clamped_starts(call: adapter.KernelCall, k: int, prefetch: Sequence[Any] = ()) -> np.ndarray:
    """Each program's window start in operand `k`'s padded array, clamped.

    Clamped as `lax.dynamic_slice` clamps it; shape (programs, dims), programs in grid
    order.
    """
    layout = call.layouts[k]
    operand = call.record.operands[call.num_scalars + k]
    starts = program_starts(operand, call.grid, prefetch)
    limit = np.asarray(layout.padded_shape, np.int64) - np.asarray(layout.block, np.int64)
    return np.asarray(np.clip(starts, 0, np.maximum(limit, 0)), np.int64)


# ---------------------------------------------------------------------------
# Kernel calls and plans, cached per kernel body.

_calls: weakref.WeakKeyDictionary[Any, dict[Any, tuple[adapter.KernelCall, Plan]]] = (
    weakref.WeakKeyDictionary()
)


def analyse(params: dict[str, Any], in_avals: Sequence[Any]) -> tuple[adapter.KernelCall, Plan]:
    """The emulator's view of a pallas_call and its plan (cached per kernel body)."""
    body, mapping = adapter.call_identity(params)
    # The interpreter asked for is part of what the emulator decides (see `_unsupported`).
    key = (tuple(in_avals), id(mapping), adapter.interpret_kind(params.get("interpret")))
    try:
        per_body = _calls.setdefault(body, {})
    except TypeError:  # not weakly referenceable: no cache
        per_body = {}
    if key not in per_body or adapter.call_identity(per_body[key][0].params)[1] is not mapping:
        call = adapter.kernel_call(params, in_avals)
        check_grid(call.grid)
        try:
            _reuse_body(call, params)
            plan = make_plan(call)
        except Exception as error:  # a bug of ours; the run still gets its result
            plan = Plan(
                call.record.name,
                call.grid,
                (),
                (),
                (),
                f"pallaslab's emulator failed to analyse it ({messages.one_line(error)}; "
                "please report)",
                failure=messages.one_line(error),
            )
        per_body[key] = (call, plan)
    return per_body[key]


# Discharged kernel bodies by what the kernel is: a cell run again defines its kernel
# anew, and discharging it again is most of the analysis (bounded, oldest out).
_bodies: collections.OrderedDict[Any, ProgramBody] = collections.OrderedDict()
_MAX_BODIES = 64


def _reuse_body(call: adapter.KernelCall, params: dict[str, Any]) -> None:
    """Gives `call` the body of an identical kernel analysed before, or remembers its own."""
    if call.unsupported:
        return
    try:
        key = (jax_adapter.value_key(params), call.grid)
    except Exception:  # a kernel the key cannot describe is analysed afresh
        return
    body = _bodies.get(key)
    if body is None:
        _bodies[key] = call.program
        while len(_bodies) > _MAX_BODIES:
            _bodies.popitem(last=False)
    else:
        _bodies.move_to_end(key)
        vars(call)["program"] = body  # KernelCall.program is a cached_property: seed it


def check_key(call: adapter.KernelCall, plan: Plan) -> tuple[Any, ...]:
    """What the emulator's program for this kernel is built from (for the compile cache).

    The pallas_call's parameters determine `call`; the plan is derived from it but
    named anyway, being what `run_call` follows. Checks key their compiled programs
    on it (`compile_cache.compile_keyed`), so a cell run again compiles nothing.
    """
    return (call.params, plan)


def plan_for_site(site: jax_adapter.KernelSite) -> Plan:
    """The plan for a kernel found in a traced program (bound as it ran, for a run's)."""
    if jax_adapter.gpu_interpreted(site):
        name = (
            jax_adapter.mesh_kernel_summary(site)[0]
            if site.primitive != "pallas_call"
            else adapter.call_name(site.params)
        )
        return Plan(
            name,
            (),
            (),
            (),
            (),
            jax_adapter.GPU_INTERPRETER_WHY,
            interpreter="mosaic_gpu",
        )
    if site.primitive != "pallas_call":
        name, kind, backend = jax_adapter.mesh_kernel_summary(site)
        where = {"mosaic_tpu": "a TPU mesh", "mosaic_gpu": "a GPU mesh"}.get(backend, "a mesh")
        chosen = adapter.requested_interpret(site.params)
        interpreter = (
            ", run by Pallas' TPU interpreter" if backend == "mosaic_tpu" and not chosen else ""
        )
        return Plan(
            name,
            (),
            (),
            (),
            (),
            f"it is a mesh kernel ({kind} on {where}{interpreter}), which the emulator "
            "does not run",
        )
    return analyse(site.params, site.in_avals)[1]


def check_grid(grid: Sequence[int | None]) -> None:
    """Refuses, with a clear error, grids too large to run program by program on CPU."""
    if all(n is not None and n >= 0 for n in grid):
        check_programs(
            [int(n) for n in grid if n is not None],
            "run on CPU (the emulator and Pallas' interpreter run every program)",
        )


def iter_plans(sites: Sequence[jax_adapter.KernelSite]) -> Iterator[Plan]:
    """The emulator's plan for each kernel of a program."""
    for site in sites:
        yield plan_for_site(site)
