"""Re-running a cell with some names pinned (autotuning: `%%kernel ... --tune`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pallaslab._src.core import running
from pallaslab._src.core.cell_code import (
    MAGIC_LINE,
    CellError,
    CellFailedError,
    compile_body,
    evaluate_call,
    failure_maker,
    names_read,
)
from pallaslab._src.core.diagnose import Diagnosis, diagnose
from pallaslab._src.records import SourceLocation


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

    fail = failure_maker(name_source, namespace)

    try:
        statements, last_expr = compile_body(body, filename, fail)
        call_code = compile(call.strip(), magic_line.file, "eval")
    except CellFailedError as failed:
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
            with running.kernel_scope(interpret):
                try:
                    exec(statements, scope)
                except Exception as error:
                    raise fail(error) from None
                fn, args, kwargs = evaluate_call(call, scope, magic_line, fail, label)
        except CellFailedError as failed:
            raise CellError(failed.diagnosis, failed.error) from None
        return fn, tuple(args), dict(kwargs)

    return run
