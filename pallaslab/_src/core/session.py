"""Running a kernel cell: execute it, trace its call, run it, explain what failed.

No IPython here: the magic hands this module the cell's text, a namespace and a file
name, and gets back an outcome to display. That keeps the magic thin and lets the
whole flow be tested without a shell.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax

from pallaslab._src.base import messages
from pallaslab._src.core import compile_cache, jax_adapter, running, settings, tiling, tracing
from pallaslab._src.core.diagnose import Diagnosis, diagnose, pallas_call_line
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.core.program import Program
from pallaslab._src.records import SourceLocation

# The magic line is line 1 of the cell; the body starts on line 2.
MAGIC_LINE = 1


@dataclasses.dataclass(frozen=True)
class CellOptions:
    """What the magic line asked for.

    Attributes:
        call: The call to inspect (`add(x, y)`), or None to inspect the kernels the
            cell ran.
        ref: Reference expression: a callable or the expected value.
        run: Whether to run the call (False with `--no-run`).
        interpret: Force Pallas interpret mode, also on GPU and TPU.
    """

    call: str | None = None
    ref: str | None = None
    run: bool = True
    interpret: bool = False


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What running a kernel cell produced.

    Attributes:
        inspection: The inspection, when tracing got that far.
        diagnosis: What went wrong, when something did.
        error: The original exception behind `diagnosis` (None for problems
            pallaslab found itself, like a block outside its array).
        last_value: The value of the cell's last expression (None when it has none).
    """

    inspection: Inspection | None = None
    diagnosis: Diagnosis | None = None
    error: BaseException | None = None
    last_value: Any = None


def cell_settings() -> settings.Settings:
    """The user's settings, applied before a cell (or the extension) runs anything.

    Kernels on a CPU run in pallaslab's emulator (its CPU lowering rule), and the
    "Persistent compile cache" setting is followed; a cache directory that cannot be
    used is a warning, never a failure.
    """
    jax_adapter.install_cpu_interpret()
    user = settings.load()
    problem = compile_cache.follow_setting(
        user.persistent_compile_cache, user.persistent_compile_cache_dir
    )
    if problem:
        warnings.warn(problem, stacklevel=2)
    return user


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
    inspection: Inspection, path: str, target: str | None = None
) -> tuple[str, Diagnosis | None]:
    """`--reproducer PATH`: the script, with the cell's operands saved beside it.

    Returns:
        What was written, in words, and None; or "" and why nothing was written.
    """
    try:
        written = inspection.reproducer(path, save_inputs=True, target=target)
    except (ValueError, RuntimeError, OSError) as error:
        return "", Diagnosis("reproducer", f"No reproducer written: {error}")
    return str(written), None


class _CellFailedError(Exception):
    """Internal: stops the cell's flow with a diagnosis."""

    def __init__(self, diagnosis: Diagnosis, error: BaseException | None) -> None:
        super().__init__(diagnosis.summary)
        self.diagnosis = diagnosis
        self.error = error


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

    def fail(error: BaseException, fallback: SourceLocation | None = None) -> _CellFailedError:
        return _CellFailedError(diagnose(error, name_source, namespace, fallback), error)

    try:
        with _interpret_scope(options.interpret), jax_adapter.quiet_failed_callbacks():
            statements, last_expr = _compile(body, filename, fail)
            with jax_adapter.recording_kernels() as recorded:
                try:
                    exec(statements, namespace)
                    if last_expr is not None:
                        last_value = eval(last_expr, namespace)
                except Exception as error:
                    raise fail(error) from None
            if options.call is None:
                if options.ref is not None:
                    raise _CellFailedError(
                        Diagnosis(
                            "usage",
                            "--ref compares the result of the call on the magic line; "
                            'name one, as in %%kernel add(x, y) --ref "x + y".',
                            location=magic_line,
                            label=name_source(filename) or "",
                        ),
                        None,
                    )
                inspection = inspect_recorded(recorded)
                return CellOutcome(inspection=inspection, last_value=last_value)

            fn, args, kwargs = _evaluate_call(
                options.call, namespace, magic_line, fail, name_source(filename) or ""
            )
            try:
                program = tracing.trace_program(
                    fn, args, kwargs, arg_names=call_argument_names(options.call)
                )
            except Exception as error:
                raise fail(error, magic_line) from None
            inspection = Inspection.from_program(program)
            _check_grids(inspection, program, name_source)
            _check_blocks(inspection, args, kwargs, name_source)
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
                _check_reference(inspection, magic_line, name_source)
    except _CellFailedError as failed:
        return CellOutcome(
            inspection=inspection,
            diagnosis=failed.diagnosis,
            error=failed.error,
            last_value=last_value,
        )
    return CellOutcome(inspection=inspection, last_value=last_value)


def _interpret_scope(forced: bool) -> contextlib.AbstractContextManager[None]:
    # On CPU, kernels the cell runs are emulated; --interpret forces Pallas' own
    # interpreter (also on GPU and TPU).
    return running.kernel_scope(forced)


def _on_cpu() -> bool:
    return bool(jax.default_backend() == "cpu")


def _compile(
    body: str, filename: str, fail: Callable[..., _CellFailedError]
) -> tuple[Any, Any | None]:
    """Compiles the body; the last expression separately, so its value can be shown."""
    # One leading line stands for the magic line, so line numbers match the cell's.
    source = "\n" + body
    try:
        tree = ast.parse(source, filename, "exec")
    except SyntaxError as error:
        raise fail(error) from None
    last_expr = None
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        tree.body.pop()
        last_expr = compile(ast.Expression(last.value), filename, "eval")
    return compile(tree, filename, "exec"), last_expr


# Argument expressions short and plain enough to name an argument by (`x`, `p.w`).
_NAME_LIKE = (ast.Name, ast.Attribute, ast.Subscript)
_MAX_NAME = 24


def call_argument_names(call: str) -> tuple[str | None, ...]:
    """How a written call names its positional arguments: `f(x, 2 * y)` -> (x, None).

    Only plain names, attributes and subscripts count; after a `*rest` the positions
    are unknown, so nothing more is named.
    """
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return ()
    if not isinstance(node, ast.Call):
        return ()
    names: list[str | None] = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            break
        text = ast.unparse(arg) if isinstance(arg, _NAME_LIKE) else ""
        names.append(text if text and len(text) <= _MAX_NAME else None)
    return tuple(names)


def _evaluate_call(
    call: str,
    namespace: dict[str, Any],
    magic_line: SourceLocation,
    fail: Callable[..., _CellFailedError],
    label: str = "",
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Evaluates `f(a, b, k=c)` from the magic line into (f, args, kwargs)."""
    try:
        node = ast.parse(call.strip(), "<magic line>", "eval").body
    except SyntaxError as error:
        raise fail(
            SyntaxError(f"the call on the magic line is not Python: {error.msg}"), magic_line
        ) from None
    if not isinstance(node, ast.Call):
        raise _CellFailedError(
            Diagnosis(
                "usage",
                f"'{call.strip()}' is not a call; write the call to inspect, as in "
                "%%kernel add(x, y).",
                location=magic_line,
                label=label,
            ),
            None,
        )
    collector = "__pallaslab_collect__"
    pieces = ast.Call(func=ast.Name(collector, ast.Load()), args=node.args, keywords=node.keywords)
    function = ast.Expression(node.func)
    collected = ast.Expression(pieces)
    for tree in (function, collected):
        ast.fix_missing_locations(ast.increment_lineno(tree, 0))
    scope = {**namespace, collector: lambda *a, **k: (a, k)}
    try:
        fn = eval(compile(function, magic_line.file, "eval"), scope)
        args, kwargs = eval(compile(collected, magic_line.file, "eval"), scope)
    except Exception as error:
        raise fail(error, magic_line) from None
    if not callable(fn):
        raise _CellFailedError(
            Diagnosis(
                "usage",
                f"'{ast.unparse(node.func)}' is a {type(fn).__name__}, not a function to call.",
                location=magic_line,
                label=label,
            ),
            None,
        )
    return fn, args, kwargs


def _check_grids(
    inspection: Inspection, program: Program, name_source: Callable[[str], str | None]
) -> None:
    """Stops with a clear message at a grid with a negative size."""
    for kernel, site in zip(inspection.kernels, program.sites, strict=True):
        written = jax_adapter.written_grid(site.params)
        if not any(n is not None and n < 0 for n in written):
            continue
        hints = [
            SourceLocation(o.index_map.source_file, o.index_map.source_line)
            for o in kernel.operands
            if o.index_map is not None and o.index_map.source_file
        ]
        files = [kernel.call_site.file] if kernel.call_site else []
        location = pallas_call_line(hints, "grid", files) or kernel.call_site
        label = name_source(location.file) if location else None
        shown = tuple("?" if n is None else n for n in written)
        raise _CellFailedError(
            Diagnosis(
                "grid",
                f"kernel {kernel.name} has grid={shown}: a grid size cannot be negative.",
                "Each grid entry is how many programs run along that axis, e.g. "
                "grid=(n // 128,) for blocks of 128 along an array of n.",
                location=location if label else None,
                label=label or "",
            ),
            None,
        )


def _check_blocks(
    inspection: Inspection,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name_source: Callable[[str], str | None],
) -> None:
    """Stops with a clear message when a block lies wholly outside its array."""
    for kernel, stray in tiling.stray_blocks(inspection, args, kwargs)[:1]:
        index_map = stray.operand.index_map
        location = (
            SourceLocation(index_map.source_file, index_map.source_line)
            if index_map and index_map.source_file
            else kernel.call_site
        )
        label = name_source(location.file) if location else None
        raise _CellFailedError(
            Diagnosis(
                "block-out-of-bounds",
                f"in kernel {kernel.name}, {stray.describe()}",
                "Every block needs at least one element inside its array: check the "
                "grid and the index map (an index map returns block indices, not "
                "element offsets).",
                location=location if label else None,
                label=label or "",
            ),
            None,
        )


def _run(
    inspection: Inspection,
    *,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: CellOptions,
    namespace: dict[str, Any],
    magic_line: SourceLocation,
    fail: Callable[..., _CellFailedError],
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
        raise fail(error, magic_line) from None
    return inspection.with_result(result)


def _check_reference(
    inspection: Inspection, magic_line: SourceLocation, name_source: Callable[[str], str | None]
) -> None:
    """A reference of another shape or dtype is a mistake in the magic line."""
    result = inspection.result
    if result is None or result.comparison is None or not result.comparison.problem:
        return
    raise _CellFailedError(
        Diagnosis(
            "reference",
            f"--ref does not match {inspection.name}: {result.comparison.problem}.",
            "The reference must compute the same outputs: same shapes, same dtypes "
            "(cast with .astype(...) if needed).",
            location=magic_line,
            label=name_source(magic_line.file) or "",
        ),
        None,
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


# ---------------------------------------------------------------------------
# Re-running a cell with some names pinned (autotuning: `%%kernel ... --tune`).


class CellError(Exception):
    """A cell could not be run as asked; `diagnosis` says why and where."""

    def __init__(self, diagnosis: Diagnosis, error: BaseException | None = None) -> None:
        super().__init__(diagnosis.message())
        self.diagnosis = diagnosis
        self.error = error


class _PinnedNamespace(dict[str, Any]):
    """A namespace in which some names keep their given values.

    The cell's own top-level assignments to a pinned name (`BLOCK_M = 128`) are
    ignored, so the config being tried is what the code reads.
    """

    def __init__(self, base: Mapping[str, Any], pinned: Mapping[str, Any]) -> None:
        super().__init__(base)
        super().update(pinned)
        self._pinned = frozenset(pinned)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._pinned:
            super().__setitem__(key, value)


def names_read(code: types.CodeType) -> set[str]:
    """Every global name the code (and the functions it defines) reads or assigns."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= names_read(const)
    return found


def config_runner(
    body: str,
    *,
    filename: str,
    call: str,
    namespace: Mapping[str, Any],
    names: Iterable[str],
    name_source: Callable[[str], str | None],
    interpret: bool = False,
) -> Callable[[Mapping[str, Any]], tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    """A function that runs the cell with some names set, and evaluates its call.

    Each run works in a copy of `namespace`, so the user's names are never changed.

    Args:
        body: The cell's text below the magic line.
        filename: The file name the cell was compiled under.
        call: The call on the magic line, e.g. `matmul(a, b)`.
        namespace: The user's namespace (copied, never written).
        names: The names a config sets; each must be one the cell or the call reads.
        name_source: Names files in messages.
        interpret: Force Pallas interpret mode while the cell runs.

    Raises:
        CellError: At once, when the cell does not compile or never reads one of
            `names`; from the returned function, when the cell or the call fails
            for a config.
    """
    magic_line = SourceLocation(filename, MAGIC_LINE)
    label = name_source(filename) or ""

    def fail(error: BaseException, fallback: SourceLocation | None = None) -> _CellFailedError:
        return _CellFailedError(diagnose(error, name_source, namespace, fallback), error)

    try:
        statements, last_expr = _compile(body, filename, fail)
        call_code = compile(call.strip(), magic_line.file, "eval")
    except _CellFailedError as failed:
        raise CellError(failed.diagnosis, failed.error) from None
    except SyntaxError as error:
        raise CellError(diagnose(error, name_source, namespace, magic_line), error) from None
    read = names_read(statements) | names_read(call_code)
    if last_expr is not None:
        read |= names_read(last_expr)
    unread = [n for n in names if n not in read]
    if unread:
        raise CellError(
            Diagnosis(
                "usage",
                f"--tune sets {', '.join(unread)}, but the cell never reads "
                f"{'that name' if len(unread) == 1 else 'those names'}.",
                "Tune names the code uses, e.g. BLOCK_M = 128 at the top and "
                "pl.BlockSpec((BLOCK_M, K), ...) below; for a keyword like "
                "num_warps=4, write num_warps=num_warps and set num_warps = 4.",
                location=magic_line,
                label=label,
            )
        )

    def run(config: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        scope = _PinnedNamespace(namespace, config)
        try:
            with _interpret_scope(interpret):
                try:
                    exec(statements, scope)
                except Exception as error:
                    raise fail(error) from None
                fn, args, kwargs = _evaluate_call(call, scope, magic_line, fail, label)
        except _CellFailedError as failed:
            raise CellError(failed.diagnosis, failed.error) from None
        return fn, tuple(args), dict(kwargs)

    return run
