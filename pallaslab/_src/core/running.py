"""Running a traced program on the backend at hand, compared with a reference."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import kernel_output
from pallaslab._src.core import (
    checking,
    chips,
    compile_cache,
    emulator,
    gpu_interpreting,
    jax_adapter,
    memory,
    run_budget,
    tracing,
)
from pallaslab._src.core.comparison import compare_located
from pallaslab._src.core.prefetch import kernel_inputs
from pallaslab._src.core.program import Program, Traced, require_call, require_program
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.records import OutOfBounds, OutputSummary, RunResult


def run(
    traced: Traced,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    ref: Any = None,
    *,
    interpret: bool = False,
    check: bool | None = None,
) -> RunResult:
    """Runs the traced program once and summarises (and compares) its outputs.

    On CPU, kernels run in pallaslab's emulator (Pallas' interpreter for what it does
    not cover); on GPU and TPU they are compiled.

    Args:
        traced: The records and program of the traced call.
        args: Positional arguments as the traced callable takes them; with neither
            these nor `kwargs`, the traced examples. Arguments given as shapes
            (`jax.ShapeDtypeStruct`) run on seeded random data (`example_arrays`).
        kwargs: Keyword arguments.
        ref: A callable taking the same arguments, or the expected output(s); the
            comparison locates mismatches per output block.
        interpret: Run kernels in Pallas' own interpreter (also on GPU and TPU).
        check: After an emulated run, look for output tiles that depend on padding,
            never-written memory or masked-out lanes, for loads and stores that reach
            outside their block, and confirm races by running kernels in other
            orders. None (the default) checks whenever the emulator ran every kernel.
    """
    program = require_call(traced, "run it")
    assert program.flat_fn is not None
    assert program.rebuild is not None
    kwargs = dict(kwargs or {})
    given = program.dynamic_leaves(args, kwargs) if args or kwargs else program.examples()
    # Arguments given as shapes (jax.ShapeDtypeStruct) run on seeded random data.
    seeded = tuple(
        spec.path
        for spec, leaf in zip(program.args, given, strict=True)
        if isinstance(leaf, jax.ShapeDtypeStruct)
    )
    leaves = example_arrays(given)
    backend = jax.default_backend()
    emulating = backend == "cpu" and not interpret
    plans = [emulator.plan_for_site(site) for site in program.sites] if emulating else []
    mosaic_gpu = gpu_interpreting.runs_mosaic_gpu(program.sites)
    started = time.perf_counter()
    stopped = None
    with (
        kernel_output.clipped(),
        run_budget.watched(),
        gpu_interpreting.capture(mosaic_gpu) as reported,
    ):
        try:
            outputs, run_sites = _execute(program, leaves, interpret)
        except Exception as error:
            stopped = gpu_interpreting.recover(error) if mosaic_gpu else None
            if stopped is None:
                raise
            # The interpreter stopped an out-of-bounds read: run again with such reads
            # giving NaN, so the run has outputs and the read is a finding.
            outputs, run_sites = _execute(program, leaves, interpret, "uninitialized")
        jax.effects_barrier()  # its prints are out
    seconds = time.perf_counter() - started
    plans = _with_interpreted(plans, run_sites, interpret)
    flat_outputs = [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]
    out_bytes = sum(o.nbytes for o in flat_outputs)
    ran = f"The kernel ran ({seconds:.2f} s on {backend})"
    comparison = None
    expected: tuple[np.ndarray, ...] = ()
    if ref is not None:
        # The reference's outputs, then two masks a byte an element (`mismatch`).
        need = out_bytes + 2 * sum(o.size for o in flat_outputs)
        with memory.step("comparing its outputs with the reference", ran, need):
            if callable(ref):
                call_args, call_kwargs = program.rebuild(leaves)
                ref = call_reference(ref, call_args, call_kwargs)
            comparison = compare_located(traced, flat_outputs, ref, leaves=given)
            expected = tuple(np.asarray(r) for r in jax.tree_util.tree_leaves(ref))
    notices = [plan.describe() for plan in plans]
    findings = checking.KernelFindings()
    if emulating and plans and (check or (check is None and all(p.emulated for p in plans))):
        # Each check runs the kernels again: their outputs twice over, at least.
        if missing := memory.shortfall(2 * out_bytes):
            findings.notices.append(
                f"Not checked for leaks, out-of-bounds slices and races: {missing}."
            )
        else:
            findings = _checked(program, leaves, plans, ran)
    kernels = traced.kernels
    if stopped is not None:
        findings.out_of_bounds.append(gpu_interpreting.out_of_bounds(stopped, kernels))
    stopped_at = {(o.kernel_index, o.access) for o in findings.out_of_bounds}
    findings.out_of_bounds.extend(
        o  # one finding per access: the interpreter's own, where it stopped one
        for o in _copy_window_overruns(traced, run_sites)
        if (o.kernel_index, o.access) not in stopped_at
    )
    with memory.step("summarising its outputs", ran):
        summaries = tuple(
            summarize(spec.path, value)
            for spec, value in zip(program.outputs, flat_outputs, strict=True)
        )
    return RunResult(
        backend=backend,
        mode=run_mode(backend, interpret, bool(program.sites), plans),
        outputs=summaries,
        seconds=seconds,
        comparison=comparison,
        values=tuple(flat_outputs),
        expected=expected,
        notices=(*notices, *findings.notices),
        leaks=tuple(findings.leaks),
        race_checks=tuple(findings.race_checks),
        out_of_bounds=tuple(findings.out_of_bounds),
        seeded_inputs=seeded,
        interpreter_races=gpu_interpreting.races(reported, kernels),
    )


def _execute(
    program: Program, leaves: Sequence[Any], interpret: bool, out_of_bounds_reads: str = "raise"
) -> tuple[Any, list[jax_adapter.KernelSite]]:
    """Runs the program once; its outputs and its kernels as they were bound to run."""
    with (
        kernel_scope(interpret, program.chip),
        jax_adapter.gpu_interpret_scope(out_of_bounds_reads=out_of_bounds_reads),
    ):
        assert program.flat_fn is not None
        traced = jax.jit(program.flat_fn, **tracing.run_options()).trace(*leaves)
        # Compiled by what the program is: an unchanged cell run again skips XLA.
        compiled = compile_cache.compile_traced(traced, leaves)
        outputs = run_budget.ready(compiled(*leaves))  # interruptible while it runs
    return outputs, jax_adapter.find_kernel_sites(traced.jaxpr)


def _with_interpreted(
    plans: list[emulator.Plan], run_sites: Sequence[jax_adapter.KernelSite], interpret: bool
) -> list[emulator.Plan]:
    """The plans, with the kernels JAX's Mosaic GPU interpreter ran said to have run there.

    Which kernels it ran is read from the program as it was bound to run (the choice
    is made when a kernel is bound, `jax_adapter.execution`).
    """
    interpreted = [emulator.plan_for_site(s) for s in run_sites if jax_adapter.gpu_interpreted(s)]
    if not interpreted:
        return plans
    if interpret or len(plans) != len(run_sites):
        return interpreted
    return [
        emulator.plan_for_site(site) if jax_adapter.gpu_interpreted(site) else plan
        for plan, site in zip(plans, run_sites, strict=True)
    ]


def _copy_window_overruns(
    traced: Traced, run_sites: Sequence[jax_adapter.KernelSite]
) -> list[OutOfBounds]:
    """Copies of the kernels JAX's Mosaic GPU interpreter ran whose windows overrun.

    The interpreter clamps such a window without a word (JAX's dynamic slices), so
    they are found from the kernel's plan, where every CTA's window is known.
    """
    from pallaslab._src.core import mosaic_gpu  # noqa: PLC0415 - only for such kernels
    from pallaslab._src.geometry.mosaic_gpu import window_overruns  # noqa: PLC0415

    found: list[OutOfBounds] = []
    for index, site in enumerate(run_sites):
        if index >= len(traced.kernels) or not jax_adapter.gpu_interpreted(site):
            continue
        try:
            plan = mosaic_gpu.kernel_plan(traced, index)
        except ValueError:  # a body pallaslab cannot follow: the run stands unchecked
            continue
        found.extend(window_overruns(traced.kernels[index], plan))
    return found


def call_reference(ref: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The reference's outputs, computed under `jax.jit` where it can be.

    Fused, it makes no temporaries the size of the outputs; a reference that cannot
    be traced (NumPy code, Python branches on values) is called as it is.
    """
    try:
        return jax.block_until_ready(jax.jit(ref)(*args, **kwargs))
    except Exception:  # not traceable: as written (its own error, if it fails)
        return ref(*args, **kwargs)


def _checked(
    program: Program, leaves: Sequence[Any], plans: list[emulator.Plan], ran: str
) -> checking.KernelFindings:
    """The checks after a run, silent (what they print, the run printed), bounded."""
    with kernel_output.muted():
        try:
            with run_budget.watched(), memory.step("checking it", ran):
                found = _check(program, leaves, plans)
                jax.effects_barrier()
        except run_budget.RunStoppedError as error:
            found = checking.KernelFindings(notices=[f"The checks after the run stopped: {error}"])
        except memory.StepMemoryError as error:
            found = checking.KernelFindings(notices=[f"Not checked: {error}"])
    return found


def forced_interpret(on: bool) -> contextlib.AbstractContextManager[None]:
    """Within the block (when `on`), every `pallas_call` traced runs in interpret mode.

    What `--interpret` asks of everything a cell times or tunes (JAX's own switch,
    part of the jit cache key).
    """
    return jax_adapter.forced_interpret(on)


@contextlib.contextmanager
def kernel_scope(
    interpret: bool = False, chip: chips.ChipChoice | None = None, *, watch_gpu: bool = False
) -> Iterator[jax_adapter.GpuWatch]:
    """Kernels traced within run emulated on CPU, or interpreted when forced.

    Everything that runs a user's kernels (a run, a cell, the timing harness) runs
    them in this scope, so they all take the same path. Off a TPU, TPU programs are
    traced for the chosen chip, and GPU kernels' device queries answer for `chip`'s
    GPU off a GPU (`chips.tracing_chip`): a program runs as it was traced. With
    `watch_gpu` and no GPU chosen, the GPU queries kernel code makes are noted in the
    yielded watch instead.
    """
    emulator.install()
    backend = jax.default_backend()
    request = emulator.INTERPRET if interpret else emulator.EMULATE if backend == "cpu" else None
    if interpret and backend != "cpu":
        # A program replayed from its jaxpr binds its kernels as traced (JAX's switch
        # is read when a pallas_call is made): pallaslab's rule interprets them.
        jax_adapter.install_platform_rule(backend)
    with (
        chips.tracing_chip(
            chips.running_choice(chip or chips.ChipChoice()), watch_gpu=watch_gpu
        ) as watch,
        # Mosaic GPU kernels run in JAX's interpreter here: a failed thread ends them.
        jax_adapter.guarded_gpu_interpreter(),
        jax_adapter.auto_interpret(),
        jax_adapter.forced_interpret(interpret),
        emulator.scope(request),
        warnings.catch_warnings(),
    ):
        # The Run tab says how each kernel ran; no need to warn as well.
        warnings.simplefilter("ignore", emulator.EmulationNotice)
        yield watch


def chip_scope(traced: Traced) -> contextlib.AbstractContextManager[Any]:
    """Within the block, kernels' device queries answer as when `traced` was traced.

    For what runs its program again outside `run` (a cell's benchmark, a sweep).
    """
    program = require_program(traced, "run it")
    return chips.tracing_chip(chips.running_choice(program.chip))


def run_mode(backend: str, interpret: bool, has_kernels: bool, plans: list[emulator.Plan]) -> str:
    """How kernels ran: "compiled", "emulated", "interpret", "mosaic-gpu-interpret" ...

    "mosaic-gpu-interpret": JAX's Mosaic GPU interpreter ran them all;
    "emulated+interpret": a mix.
    """
    in_gpu_interpreter = sum(p.interpreter == "mosaic_gpu" and not p.emulated for p in plans)
    if plans and in_gpu_interpreter == len(plans) and backend == "cpu":
        return "mosaic-gpu-interpret"
    if interpret:
        return "interpret"
    if backend != "cpu" or not has_kernels:
        return "compiled"
    emulated = sum(p.emulated for p in plans)
    if emulated == len(plans):
        return "emulated"
    return "interpret" if emulated == 0 and not in_gpu_interpreter else "emulated+interpret"


def _check(
    program: Program, leaves: Sequence[Any], plans: list[emulator.Plan]
) -> checking.KernelFindings:
    """Runs the emulator's checks on every kernel; notices say what went unchecked."""
    found = checking.KernelFindings()
    for index, (site, plan) in enumerate(zip(program.sites, plans, strict=True)):
        if not plan.emulated:
            continue
        inputs = kernel_inputs(program, index, leaves, interpret_earlier=False)
        if inputs.values is None:
            found.notices.append(
                f"{plan.kernel}: not checked for leaks, out-of-bounds slices and races: "
                f"{inputs.reason}, so it cannot be run alone."
            )
            continue
        call = emulator.analyse(site.params, site.in_avals)[0]
        found.extend(checking.check_kernel(call, plan, list(inputs.values), kernel_index=index))
    return found


#: Elements of an output summarised at once (its float64 copy is this size, not the
#: output's).
SUMMARY_CHUNK = 1 << 20


def summarize(path: str, value: np.ndarray) -> OutputSummary:
    """Shape, dtype, a preview and NaN/Inf counts of one output.

    Computed `SUMMARY_CHUNK` elements at a time: a summary of a 1 GiB output needs a
    few MiB, not a float64 copy of it.
    """
    dtype = str(value.dtype)
    flat = value.reshape(-1)
    floating = value.dtype.kind in "fc" or dtype == "bfloat16"
    nan_count = inf_count = 0
    low: float | None = None
    high: float | None = None
    for start in range(0, flat.size, SUMMARY_CHUNK):
        piece = flat[start : start + SUMMARY_CHUNK]
        if floating:
            numeric = np.real(piece).astype(np.float64)  # a complex output: its real part
            finite = numeric[np.isfinite(numeric)]
            nan_count += int(np.isnan(numeric).sum())
            inf_count += int(np.isinf(numeric).sum())
        else:
            finite = piece
        if finite.size and value.dtype.kind != "b":
            piece_low, piece_high = float(finite.min()), float(finite.max())
            low = piece_low if low is None else min(low, piece_low)
            high = piece_high if high is None else max(high, piece_high)
    return OutputSummary(
        path=path,
        shape=tuple(value.shape),
        dtype=dtype,
        preview=np.array2string(flat[:6], precision=4, separator=", ", threshold=6)
        + (" ..." if flat.size > 6 else ""),
        nan_count=nan_count,
        inf_count=inf_count,
        min=low,
        max=high,
    )
