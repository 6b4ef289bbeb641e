"""Running a traced program on the backend at hand and comparing with a reference."""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src import messages
from pallaslab._src.closeness import element_errors
from pallaslab._src.core import (
    checking,
    chips,
    compile_cache,
    emulator,
    jax_adapter,
    sharing,
    tracing,
)
from pallaslab._src.core.inspection import Program
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import (
    Comparison,
    Leak,
    OutOfBounds,
    OutputSummary,
    RaceCheck,
    RunResult,
)

# (rtol, atol relative to the reference's largest magnitude), by dtype: bf16 keeps 8
# significant bits, f16 11, f32 24, FP8 e4m3 4 and e5m2 3; integer and boolean
# outputs must match exactly.
_TOLERANCES: dict[str, tuple[float, float]] = {
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e4m3fnuz": (1.25e-1, 1.25e-1),
    "float8_e4m3b11fnuz": (1.25e-1, 1.25e-1),
    "float8_e4m3": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
    "float8_e5m2fnuz": (2.5e-1, 2.5e-1),
    "float8_e8m0fnu": (5e-1, 5e-1),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float16": (2e-3, 2e-3),
    "float32": (2e-5, 2e-5),
    "float64": (1e-9, 1e-9),
    "complex64": (2e-5, 2e-5),
    "complex128": (1e-9, 1e-9),
}


def tolerance_for(dtype: str) -> tuple[float, float]:
    """(rtol, atol scale) fit for comparing outputs of this dtype: bf16 is not f32.

    Integers and booleans must match exactly.
    """
    return _TOLERANCES.get(dtype, (0.0, 0.0))


def example_arrays(specs: Sequence[Any], seed: int = 0) -> list[Any]:
    """Concrete arrays for example arguments: `ShapeDtypeStruct`s become seeded data.

    Floating inputs are standard normal; integer inputs are small non-negative
    integers (they are often indices); booleans are fair coin flips.
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if not isinstance(spec, jax.ShapeDtypeStruct):
            arrays.append(spec)
            continue
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            value = rng.standard_normal(spec.shape, dtype=np.float32)
        elif dtype.kind in "iu":
            value = rng.integers(0, 4, spec.shape)
        elif dtype.kind == "b":
            value = rng.random(spec.shape) < 0.5
        else:
            value = rng.standard_normal(spec.shape)
        arrays.append(jax.numpy.asarray(value, dtype=spec.dtype))
    return arrays


def run_program(
    program: Program,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    ref: Any = None,
    *,
    interpret: bool = False,
    check: bool | None = None,
) -> RunResult:
    """Runs `program` once and summarises (and compares) its outputs.

    On CPU, kernels run in pallaslab's emulator (Pallas' interpreter for what it does
    not cover); on GPU and TPU they are compiled.

    Args:
        program: The traced program.
        args: Positional arguments as the traced callable takes them; with neither
            these nor `kwargs`, the traced examples. Arguments given as shapes
            (`jax.ShapeDtypeStruct`) run on seeded random data (`example_arrays`).
        kwargs: Keyword arguments.
        ref: A callable taking the same arguments, or the expected output(s).
        interpret: Run kernels in Pallas' own interpreter (also on GPU and TPU).
        check: After an emulated run, look for output tiles that depend on padding,
            never-written memory or masked-out lanes, for loads and stores that reach
            outside their block, and confirm races by running kernels in other
            orders. None (the default) checks whenever the emulator ran every kernel.
    """
    if program.flat_fn is None or program.rebuild is None:
        raise ValueError("no single program was traced; name a call to run it")
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
        comparison = compare(flat_outputs, ref)
        expected = tuple(np.asarray(r) for r in jax.tree_util.tree_leaves(ref))
    notices = [plan.describe() for plan in plans]
    findings = _Findings()
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


@dataclasses.dataclass
class _Findings:
    """What the checks after a run found, and what they could not check."""

    notices: list[str] = dataclasses.field(default_factory=list)
    leaks: list[Leak] = dataclasses.field(default_factory=list)
    race_checks: list[RaceCheck] = dataclasses.field(default_factory=list)
    out_of_bounds: list[OutOfBounds] = dataclasses.field(default_factory=list)


def _check(program: Program, leaves: Sequence[Any], plans: list[emulator.Plan]) -> _Findings:
    """Runs the emulator's checks on every kernel; notices say what went unchecked."""
    found = _Findings()
    notices, leaks, race_checks, out_of_bounds = (
        found.notices,
        found.leaks,
        found.race_checks,
        found.out_of_bounds,
    )
    for index, (site, plan) in enumerate(zip(program.sites, plans, strict=True)):
        if not plan.emulated:
            continue
        operands = jax_adapter.kernel_inputs(site, program, leaves)
        if operands is None:
            notices.append(
                f"{plan.kernel}: not checked for leaks, out-of-bounds slices and races: it runs "
                "inside a loop or branch, so it cannot be run alone."
            )
            continue
        call = emulator.analyse(site.params, site.in_avals)[0]
        try:
            leaks.extend(checking.find_leaks(call, plan, operands, kernel_index=index))
        except Exception as error:  # a check must never lose the run's result
            notices.append(f"{plan.kernel}: checks failed ({messages.one_line(error)}).")
        try:
            out_of_bounds.extend(
                checking.find_out_of_bounds(call, plan, operands, kernel_index=index)
            )
        except Exception as error:
            notices.append(
                f"{plan.kernel}: slices were not checked against their blocks "
                f"({messages.one_line(error)})."
            )
        try:
            for backend in geometry.BACKENDS:
                report = sharing.kernel_races(call, plan, operands, backend)
                if report.notice:
                    notices.append(f"{plan.kernel}: {report.notice}")
                if report.conflicts:
                    race_checks.append(
                        checking.confirm_races(
                            call,
                            plan,
                            operands,
                            backend,
                            kernel_index=index,
                            conflicts=report.conflicts,
                        )
                    )
        except Exception as error:  # a check must never lose the run's result
            notices.append(f"{plan.kernel}: checks failed ({messages.one_line(error)}).")
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


def compare(outputs: Sequence[np.ndarray], expected: Any) -> Comparison:
    """Compares outputs with a reference, with tolerances fit for the dtype."""
    references = [np.asarray(r) for r in jax.tree_util.tree_leaves(expected)]
    if len(references) != len(outputs):
        return _mismatch(
            f"the reference gives {len(references)} array(s) but the program returns {len(outputs)}"
        )
    max_abs = max_rel = 0.0
    mismatched = 0
    rtol_used = atol_used = 0.0
    for k, (out, want) in enumerate(zip(outputs, references, strict=True)):
        where = f" (output {k})" if len(outputs) > 1 else ""
        if out.shape != want.shape:
            return _mismatch(
                f"the reference has shape {tuple(want.shape)} but the program returns "
                f"{tuple(out.shape)}{where}"
            )
        if out.dtype != want.dtype:
            return _mismatch(
                f"the reference has dtype {want.dtype} but the program returns {out.dtype}{where}"
            )
        errors = element_errors(out, want, *tolerance_for(str(out.dtype)))
        mismatched += int(errors.bad.sum())
        max_abs, max_rel = max(max_abs, errors.max_abs_err), max(max_rel, errors.max_rel_err)
        rtol_used, atol_used = max(rtol_used, errors.rtol), max(atol_used, errors.atol)
    return Comparison(
        ok=mismatched == 0,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        rtol=rtol_used,
        atol=atol_used,
        mismatched=mismatched,
    )


def _mismatch(problem: str) -> Comparison:
    nan = float("nan")
    return Comparison(
        ok=False, max_abs_err=nan, max_rel_err=nan, rtol=0.0, atol=0.0, problem=problem
    )
