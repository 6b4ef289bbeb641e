"""Running a kernel cell: execute it, trace its call, run it, explain what failed.

No IPython here: the magic hands this module the cell's text, a namespace and a file
name, and gets back an outcome to display. That keeps the magic thin and lets the
whole flow be tested without a shell. The cell's code is compiled and its call
evaluated in `cell_code`, its kernels checked in `cell_checks`, and `cell_tuning`
runs it again with names pinned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from pallaslab._src.base import kernel_output, messages
from pallaslab._src.core import (
    chips,
    compile_cache,
    gpu_interpreting,
    jax_adapter,
    run_budget,
    running,
    settings,
    tracing,
)
from pallaslab._src.core.cell_checks import check_blocks, check_grids, check_reference
from pallaslab._src.core.cell_code import (
    MAGIC_LINE,
    CellError,
    CellFailedError,
    call_argument_names,
    compile_body,
    evaluate_call,
    failure_maker,
    usage_failure,
)
from pallaslab._src.core.cell_tuning import config_runner
from pallaslab._src.core.diagnose import Diagnosis
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.core.program import Program
from pallaslab._src.records import SourceLocation

# What callers import from here (some of it defined in the cell_* modules).
__all__ = [
    "MAGIC_LINE",
    "CellError",
    "CellOptions",
    "CellOutcome",
    "call_argument_names",
    "cell_settings",
    "config_runner",
    "evaluate_reference",
    "execute_cell",
    "inspect_recorded",
    "write_reproducer",
]


@dataclasses.dataclass(frozen=True)
class CellOptions:
    """What the magic line asked for.

    Attributes:
        call: The call to inspect (`add(x, y)`), or None to inspect the kernels the
            cell ran.
        ref: Reference expression: a callable or the expected value.
        run: Whether to run the call (False with `--no-run`).
        interpret: Force Pallas interpret mode, also on GPU and TPU.
        chip: The GPU or TPU to trace (and run) the kernels for ("B200"; `--chip`, or
            the chip of `--target`), None for the device at hand or the default.
    """

    call: str | None = None
    ref: str | None = None
    run: bool = True
    interpret: bool = False
    chip: str | None = None


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What running a kernel cell produced.

    Attributes:
        inspection: The inspection, when tracing got that far.
        diagnosis: What went wrong, when something did.
        error: The original exception behind `diagnosis` (None for problems
            pallaslab found itself, like a block outside its array).
        last_value: The value of the cell's last expression (None when it has none).
        interrupted: Whether an interrupt (KeyboardInterrupt) stopped the cell; what
            it had done so far (names defined, the inspection traced) is kept.
    """

    inspection: Inspection | None = None
    diagnosis: Diagnosis | None = None
    error: BaseException | None = None
    last_value: Any = None
    interrupted: bool = False


def cell_settings() -> settings.Settings:
    """The user's settings, applied before a cell (or the extension) runs anything.

    Kernels on a CPU run in pallaslab's emulator (its CPU lowering rule), and the
    "Persistent compile cache" and run budget settings are followed. A settings file
    that cannot be read, a setting that is ignored, or a cache directory that cannot
    be used is a warning (once a session each), never a failure: the defaults hold.
    """
    jax_adapter.install_cpu_interpret()
    try:
        user = settings.load()
    except Exception as error:  # a bad settings file never stops a kernel cell
        _notice_once(f"pallaslab's settings could not be read ({messages.one_line(error)})")
        user = settings.Settings()
    for ignored in user.problems:
        _notice_once(f"pallaslab setting ignored: {ignored}")
    problem = compile_cache.follow_setting(
        user.persistent_compile_cache, user.persistent_compile_cache_dir
    )
    if problem:
        warnings.warn(problem, stacklevel=2)
    run_budget.follow_setting(user.loop_iteration_budget, user.run_seconds_budget or None)
    return user


_noticed: set[str] = set()


def _notice_once(text: str) -> None:
    if text not in _noticed:
        _noticed.add(text)
        warnings.warn(text, settings.SettingsNotice, stacklevel=3)


def evaluate_reference(expression: str | None, namespace: Mapping[str, Any]) -> Any:
    """`--ref EXPR` evaluated in (a copy of) the user's namespace; None without one.

    Raises:
        CellError: Naming the magic line, when the expression fails.
    """
    if expression is None:
        return None
    try:
        return eval(expression, dict(namespace))
    except Exception as error:
        raise CellError(
            Diagnosis(
                "reference",
                f"--ref could not be evaluated: {messages.describe(error)}",
                location=SourceLocation("<magic line>", MAGIC_LINE),
                label="Cell line",
            ),
            error,
        ) from None


def write_reproducer(
    inspection: Inspection, path: str, target: str | None = None, overwrite: bool = False
) -> tuple[str, Diagnosis | None]:
    """`--reproducer PATH`: the script, with the cell's operands saved beside it.

    Returns:
        What was written, in words, and None; or "" and why nothing was written.
    """
    try:
        written = inspection.reproducer(path, save_inputs=True, target=target, overwrite=overwrite)
    except (ValueError, RuntimeError, OSError) as error:
        return "", Diagnosis("reproducer", f"No reproducer written: {error}")
    return str(written), None


def execute_cell(
    body: str,
    *,
    filename: str,
    namespace: dict[str, Any],
    options: CellOptions,
    name_source: Callable[[str], str | None],
) -> CellOutcome:
    """Runs a `%%kernel` cell's body, then inspects and runs what it asks for.

    The body runs as ordinary Python in `namespace`, so every name it defines stays
    there, also when a later step fails.

    Args:
        body: The cell's text below the magic line.
        filename: The file name the cell is compiled under (its lines are numbered
            as the cell shows them: the magic line is line 1).
        namespace: The user's namespace.
        options: What the magic line asked for.
        name_source: Names files in messages ("Cell line"); None for files that
            are not the user's.
    """
    magic_line = SourceLocation(filename, MAGIC_LINE)
    last_value = None
    inspection = None

    fail = failure_maker(name_source, namespace)

    choice = chips.choice_for(options.chip)
    try:
        with (
            run_budget.interruptible(),
            kernel_output.clipped(),
            _interpret_scope(options.interpret, choice) as watch,
            jax_adapter.quiet_failed_callbacks(),
        ):
            statements, last_expr = compile_body(body, filename, fail)
            with jax_adapter.recording_kernels() as recorded:
                try:
                    # The kernels the cell runs itself run under the budget too.
                    with run_budget.watched():
                        exec(statements, namespace)
                        if last_expr is not None:
                            last_value = eval(last_expr, namespace)
                except Exception as error:
                    raise _asked_for_a_gpu(fail(error), watch.asked) from None
            if options.call is None:
                if options.ref is not None:
                    raise usage_failure(
                        "--ref compares the result of the call on the magic line; "
                        'name one, as in %%kernel add(x, y) --ref "x + y".',
                        magic_line,
                        name_source(filename) or "",
                    )
                inspection = inspect_recorded(recorded)
                return CellOutcome(inspection=inspection, last_value=last_value)

            fn, args, kwargs = evaluate_call(
                options.call, namespace, magic_line, fail, name_source(filename) or ""
            )
            try:
                program = tracing.trace_program(
                    fn, args, kwargs, arg_names=call_argument_names(options.call), chip=choice
                )
            except Exception as error:
                raise fail(error, magic_line) from None
            # The Run tab says why there is no run, whatever stops the cell.
            inspection = dataclasses.replace(
                Inspection.from_program(program),
                not_run="the cell failed before its run (the error is shown above)"
                if options.run
                else "--no-run was given; run it with _kernel.run(...)",
            )
            check_grids(inspection, program, name_source)
            check_blocks(inspection, args, kwargs, name_source)
            if options.run:
                inspection = dataclasses.replace(
                    inspection, not_run="the run failed (the error is shown above)"
                )
            if options.run:
                inspection = _run(
                    inspection,
                    args=args,
                    kwargs=kwargs,
                    options=options,
                    namespace=namespace,
                    magic_line=magic_line,
                    fail=fail,
                )
                check_reference(inspection, magic_line, name_source)
    except CellFailedError as failed:
        return CellOutcome(
            inspection=inspection,
            diagnosis=failed.diagnosis,
            error=failed.error,
            last_value=last_value,
        )
    except KeyboardInterrupt:
        # The run's loops were stopped and XLA drained (`run_budget.watched`): what the
        # cell defined and traced so far stays.
        return CellOutcome(inspection=inspection, last_value=last_value, interrupted=True)
    return CellOutcome(inspection=inspection, last_value=last_value)


def _run(
    inspection: Inspection,
    *,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: CellOptions,
    namespace: dict[str, Any],
    magic_line: SourceLocation,
    fail: Callable[..., CellFailedError],
) -> Inspection:
    ref = None
    if options.ref is not None:
        try:
            ref = eval(compile(options.ref, magic_line.file, "eval"), dict(namespace))
        except Exception as error:
            raise fail(error, magic_line) from None
    try:
        result = running.run(inspection, args, kwargs, ref=ref, interpret=options.interpret)
    except Exception as error:
        # A Mosaic GPU kernel failing in JAX's interpreter fails at a kernel line (its
        # definition where the error names none), not at the magic line.
        gpu = [k for k in inspection.kernels if k.backend == "mosaic_gpu" and k.source]
        where = gpu_interpreting.failure_line(error, gpu[0]) if len(gpu) == 1 else None
        raise fail(error, where or magic_line) from None
    return inspection.with_result(result)


def _interpret_scope(
    forced: bool, choice: chips.ChipChoice
) -> contextlib.AbstractContextManager[jax_adapter.GpuWatch]:
    # On CPU, kernels the cell runs are emulated (Mosaic GPU ones interpreted); --interpret
    # forces Pallas' own interpreter (also on GPU and TPU); --chip answers device queries,
    # else the cell's GPU queries are noted, to say what to do if they fail.
    return running.kernel_scope(forced, choice, watch_gpu=True)


def _asked_for_a_gpu(failed: CellFailedError, asked: list[str]) -> CellFailedError:
    """A cell that failed after asking for a GPU off one: says so, and what to write."""
    if not asked or failed.diagnosis.kind not in ("error", "callback-error"):
        return failed
    what = failed.diagnosis.summary.rstrip(".")
    return CellFailedError(
        dataclasses.replace(
            failed.diagnosis,
            kind="no-gpu",
            summary=f"The code asked the GPU ({asked[0]}) and there is none here: {what}.",
            hint="Name the GPU to trace and run it for, as in %%kernel --chip H100: its SM "
            "count, compute capability and device kind answer then. A call named on the "
            "magic line (%%kernel f(x)) is traced for an H100 by default.",
        ),
        failed.error,
    )


def inspect_recorded(sites: list[jax_adapter.KernelSite]) -> Inspection:
    """An inspection of the kernels a cell ran, when no call was named."""
    unique: list[jax_adapter.KernelSite] = []
    for site in sites:
        if not any(jax_adapter.same_kernel(site, seen) for seen in unique):
            unique.append(site)
    notices: tuple[str, ...] = ()
    if not unique:
        notices = (
            "This cell ran no Pallas kernel pallaslab could trace. A function JAX "
            "compiled in an earlier cell runs from JAX's cache without being traced "
            "again: name the call on the magic line, as in %%kernel add(x, y).",
        )
    elif notice := jax_adapter.feature_notice("record-kernels"):
        notices = (notice,)
    program = Program(
        name="cell",
        flat_fn=None,
        closed_jaxpr=None,
        args=(),
        outputs=(),
        example_args=(),
        sites=tuple(unique),
    )
    return Inspection.from_program(program, notices=notices)
