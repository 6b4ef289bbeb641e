"""Running a traced program on the backend at hand, compared with a reference."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import (
    checking,
    chips,
    compile_cache,
    emulator,
    jax_adapter,
    tracing,
)
from pallaslab._src.core.comparison import compare_located
from pallaslab._src.core.prefetch import kernel_inputs
from pallaslab._src.core.program import Program, Traced, require_call
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.records import OutputSummary, RunResult


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
    given = program.dynamic_leaves(args, kwargs) if args or kwargs else list(program.example_args)
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
    started = time.perf_counter()
    with kernel_scope(interpret):
        # Compiled by what the program is: an unchanged cell run again skips XLA.
        compiled = compile_cache.compile_function(program.flat_fn, leaves, **tracing.run_options())
        outputs = jax.block_until_ready(compiled(*leaves))
    seconds = time.perf_counter() - started
    flat_outputs = [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]
    comparison = None
    expected: tuple[np.ndarray, ...] = ()
    if ref is not None:
        if callable(ref):
            call_args, call_kwargs = program.rebuild(leaves)
            ref = ref(*call_args, **call_kwargs)
        comparison = compare_located(traced, flat_outputs, ref, leaves=given)
        expected = tuple(np.asarray(r) for r in jax.tree_util.tree_leaves(ref))
    notices = [plan.describe() for plan in plans]
    findings = checking.KernelFindings()
    if emulating and plans and (check or (check is None and all(p.emulated for p in plans))):
        findings = _check(program, leaves, plans)
    return RunResult(
        backend=backend,
        mode=run_mode(backend, interpret, bool(program.sites), plans),
        outputs=tuple(
            summarize(spec.path, value)
            for spec, value in zip(program.outputs, flat_outputs, strict=True)
        ),
        seconds=seconds,
        comparison=comparison,
        values=tuple(flat_outputs),
        expected=expected,
        notices=(*notices, *findings.notices),
        leaks=tuple(findings.leaks),
        race_checks=tuple(findings.race_checks),
        out_of_bounds=tuple(findings.out_of_bounds),
        seeded_inputs=seeded,
    )


def forced_interpret(on: bool) -> contextlib.AbstractContextManager[None]:
    """Within the block (when `on`), every `pallas_call` traced runs in interpret mode.

    What `--interpret` asks of everything a cell times or tunes (JAX's own switch,
    part of the jit cache key).
    """
    return jax_adapter.forced_interpret(on)


@contextlib.contextmanager
def kernel_scope(interpret: bool = False) -> Iterator[None]:
    """Kernels traced within run emulated on CPU, or interpreted when forced.

    Everything that runs a user's kernels (a run, a cell, the timing harness) runs
    them in this scope, so they all take the same path. Off a TPU, TPU programs are
    traced for the chosen chip (`chips.tracing_chip`).
    """
    emulator.install()
    backend = jax.default_backend()
    request = emulator.INTERPRET if interpret else emulator.EMULATE if backend == "cpu" else None
    with (
        chips.tracing_chip(),
        jax_adapter.auto_interpret(),
        jax_adapter.forced_interpret(interpret),
        emulator.scope(request),
        warnings.catch_warnings(),
    ):
        # The Run tab says how each kernel ran; no need to warn as well.
        warnings.simplefilter("ignore", emulator.EmulationNotice)
        yield


def run_mode(backend: str, interpret: bool, has_kernels: bool, plans: list[emulator.Plan]) -> str:
    """How kernels ran: "compiled", "emulated", "interpret" or "emulated+interpret"."""
    if interpret:
        return "interpret"
    if backend != "cpu" or not has_kernels:
        return "compiled"
    emulated = sum(p.emulated for p in plans)
    if emulated == len(plans):
        return "emulated"
    return "interpret" if emulated == 0 else "emulated+interpret"


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


def summarize(path: str, value: np.ndarray) -> OutputSummary:
    """Shape, dtype, a preview and NaN/Inf counts of one output."""
    dtype = str(value.dtype)
    flat = value.reshape(-1)
    numeric = flat.astype(np.float64) if value.dtype.kind in "fc" or dtype == "bfloat16" else None
    finite = numeric[np.isfinite(numeric)] if numeric is not None else flat
    return OutputSummary(
        path=path,
        shape=tuple(value.shape),
        dtype=dtype,
        preview=np.array2string(flat[:6], precision=4, separator=", ", threshold=6)
        + (" ..." if flat.size > 6 else ""),
        nan_count=int(np.isnan(numeric).sum()) if numeric is not None else 0,
        inf_count=int(np.isinf(numeric).sum()) if numeric is not None else 0,
        min=float(finite.min()) if finite.size and value.dtype.kind != "b" else None,
        max=float(finite.max()) if finite.size and value.dtype.kind != "b" else None,
    )
