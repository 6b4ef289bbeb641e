"""The `%%kernel` cell magic: parse the line, run the core, display the inspector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from pallaslab._src import settings, sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.diagnose import Diagnosis
from pallaslab._src.core.session import CellOptions, execute_cell, is_user_source
from pallaslab._src.views.header import Problem
from pallaslab._src.views.inspector import Inspector

DEFAULT_NAME = "_kernel"


class KernelCellError(Exception):
    """A `%%kernel` cell failed; shown as one message instead of a traceback."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(diagnosis.message())
        self.diagnosis = diagnosis

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback (red name, plain message).
        first, *rest = self.diagnosis.message().splitlines()
        return [f"\x1b[0;31mKernelError\x1b[0m: {first}", *rest]


def split_call(line: str) -> tuple[str | None, str]:
    """Splits `add(x, y) --ref "x + y"` into the call and the options.

    The call ends at the first blank outside brackets and quotes; a line that starts
    with an option has no call.
    """
    text = line.strip()
    if not text or text.startswith("-"):
        return None, text
    depth = 0
    quote = ""
    for pos, char in enumerate(text):
        if quote:
            if char == quote and text[pos - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char.isspace() and depth == 0:
            return text[:pos], text[pos:].strip()
    return text, ""


def unquote(value: str | None) -> str | None:
    """`"x + y"` -> `x + y`: strips one pair of matching outer quotes."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@magics_class
class KernelMagics(Magics):
    """Holds the `%%kernel` magic."""

    @cell_magic
    @magic_arguments()
    @argument(
        "call",
        nargs="?",
        help="The call to inspect and run, e.g. `add(x, y)`, evaluated after the cell. "
        "Without one, the Pallas kernels the cell ran are inspected.",
    )
    @argument("--ref", metavar="EXPR", help="Reference: a callable or an expression.")
    @argument("--no-run", action="store_true", help="Trace only; do not run.")
    @argument("--interpret", action="store_true", help="Force Pallas interpret mode.")
    @argument("--traceback", action="store_true", help="On error, show the full traceback.")
    @argument(
        "--name",
        default=DEFAULT_NAME,
        help=f"Store the inspection under this name (default {DEFAULT_NAME}).",
    )
    def kernel(self, line: str, cell: str) -> None:
        """Run a cell of Pallas code, then trace, run and inspect its kernels.

        The cell runs as ordinary Python in your namespace. Then the call on the magic
        line is traced (never parsed), run on the backend at hand (interpret mode on
        CPU), compared with --ref, and shown in the inspector. The inspection is kept
        as `_kernel` (or --name); its run's outputs are `_kernel.result.values`.

        Example::

            %%kernel add(x, y) --ref "x + y"
            def add_kernel(x_ref, y_ref, o_ref):
                o_ref[...] = x_ref[...] + y_ref[...]
            ...
        """
        call, rest = split_call(line)
        options = parse_argstring(self.kernel, rest)
        # IPython's argument splitting keeps quotes: --ref "x + y" arrives quoted.
        options.ref = unquote(options.ref)
        if options.call is not None:
            raise UsageError(f"unexpected argument {options.call!r}; the call goes first")
        if not options.name.isidentifier():
            raise UsageError(f"--name must be a Python name, not {options.name!r}")
        shell = self.shell
        assert shell is not None
        filename = self._register_cell(line, cell)
        jax_adapter.install_cpu_interpret()

        def name_source(file: str) -> str | None:
            if file == filename:
                return "Cell line"
            if label := sources.cell_label(file):
                return f"{label} line"
            number = getattr(shell.compile, "_filename_map", {}).get(file)
            if number is not None:
                return f"Cell [{number}] line"
            return f"{Path(file).name} line" if is_user_source(file) else None

        outcome = execute_cell(
            cell,
            filename=filename,
            namespace=shell.user_ns,
            options=CellOptions(
                call=call,
                ref=options.ref,
                run=not options.no_run,
                # The "interpret" setting (JupyterLab's settings editor) is a default --interpret.
                interpret=options.interpret or settings.load().interpret,
            ),
            name_source=name_source,
        )
        diagnosis = outcome.diagnosis
        problem = _problem(diagnosis) if diagnosis else None
        if outcome.inspection is not None:
            shell.user_ns[options.name] = outcome.inspection
            display(Inspector(outcome.inspection, problem))
        if outcome.last_value is not None and diagnosis is None:
            display(outcome.last_value)
        if diagnosis is not None:
            if options.traceback and outcome.error is not None:
                raise outcome.error
            raise KernelCellError(diagnosis)

    def _register_cell(self, line: str, cell: str) -> str:
        """Gives the cell a file name (its lines numbered as shown) and a label."""
        shell = self.shell
        assert shell is not None
        text = f"%%kernel {line}\n{cell}"
        # The number in the cell's prompt: IPython >= 9.x counts the cell before running
        # it (execution_count is already the next one); prompt_count is right either way.
        number = shell.displayhook.prompt_count
        try:
            filename = shell.compile.cache(text, number=number, raw_code=text)
        except (AttributeError, TypeError):
            filename = f"<kernel-cell-{number}>"
        sources.register_cell(filename, f"Cell [{number}]", text)
        return str(filename)


def _problem(diagnosis: Diagnosis) -> Problem:
    where = f"{diagnosis.label} {diagnosis.line}" if diagnosis.label and diagnosis.line else ""
    return Problem(where=where, summary=diagnosis.summary, hint=diagnosis.hint, kind=diagnosis.kind)


def load(shell: Any) -> None:
    """Registers the magic and lets kernels run on CPU in interpret mode."""
    jax_adapter.install_cpu_interpret()
    shell.register_magics(KernelMagics)
