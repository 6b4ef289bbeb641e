"""The `%%kernel` cell magic: parse the line, run the core, display the inspector."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from pallaslab._src.base import messages, sources
from pallaslab._src.base.argparsing import did_you_mean
from pallaslab._src.base.textscan import top_level
from pallaslab._src.bench.cluster.spec import ClusterError
from pallaslab._src.core import diffing, session
from pallaslab._src.core.diagnose import Diagnosis
from pallaslab._src.core.session import MAGIC_LINE, CellError, CellOptions, execute_cell
from pallaslab._src.records import hardware
from pallaslab._src.records.targets import implied_chip, parse_target, reading_note
from pallaslab._src.views.header import Problem
from pallaslab._src.views.inspector import Inspector

DEFAULT_NAME = "_kernel"
BENCH_NAME = "_bench"
TUNE_NAME = "_tune"
DIFF_NAME = "_diff"


def magic_line_error(message: str) -> UsageError:
    """A mistake on the magic line, shown by IPython as `UsageError: Cell line 1: ...`.

    A plain `UsageError`: IPython prints exactly that type as one line (a subclass
    would get a traceback).
    """
    return UsageError(f"Cell line {MAGIC_LINE}: {messages.clip(message, max_lines=4)}")


class KernelInterrupted(KeyboardInterrupt):
    """A `%%kernel` cell interrupted (Jupyter's stop button); shown as one line."""

    def __init__(self, kept: str = "") -> None:
        super().__init__(f"interrupted; results so far kept{kept}")

    def _render_traceback_(self) -> list[str]:
        # IPython shows this line instead of the 50-odd frames of pallaslab and JAX
        # the interrupt passed through.
        return [f"\x1b[0;31mKeyboardInterrupt\x1b[0m: {self.args[0]}"]


class KernelCellError(Exception):
    """A `%%kernel` cell failed; shown as one message instead of a traceback."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(diagnosis.message())
        self.diagnosis = diagnosis

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback (red name, plain message).
        first, *rest = self.diagnosis.message().splitlines() or [""]
        return [f"\x1b[0;31mKernelError\x1b[0m: {first}", *rest]


def split_call(line: str) -> tuple[str | None, str]:
    """Splits `add(x, y) --ref "x + y"` into the call and the options.

    The call ends at the first blank outside brackets and quotes; a line that starts
    with an option has no call.
    """
    text = line.strip()
    if not text or text.startswith("-"):
        return None, text
    for pos, char in top_level(text):
        if char.isspace():
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
    # IPython prints the usage as "%" + this name: a cell magic's is "%%kernel", and
    # the call comes first (argparse would list a positional argument last).
    @magic_arguments("%kernel [CALL]")
    # Documented in the docstring: argparse cannot place it first in the usage.
    @argument("call", nargs="?", help=argparse.SUPPRESS)
    @argument("--ref", metavar="EXPR", help="Reference: a callable or an expression.")
    @argument("--no-run", action="store_true", help="Trace only; do not run.")
    @argument(
        "--interpret",
        action="store_true",
        help="Force Pallas' own interpreter (instead of pallaslab's emulator on CPU).",
    )
    @argument("--traceback", action="store_true", help="On error, show the full traceback.")
    @argument(
        "--bench",
        action="store_true",
        help=f"Time the call and the XLA baseline (--ref under jax.jit) with pallaslab's "
        f"harness; the table is kept as '{BENCH_NAME}'.",
    )
    @argument(
        "--tune",
        nargs="+",
        metavar="NAME=V1,V2",
        help=f"Autotune: run the cell for every combination of these values of names it "
        f"reads (e.g. --tune BLOCK_M=64,128 num_warps=4,8), check each against --ref, time "
        f"it, keep the best; results are cached on disk; the result is kept as '{TUNE_NAME}'.",
    )
    @argument("--retune", action="store_true", help="With --tune: measure cached configs again.")
    @argument(
        "--cluster",
        metavar="ADDRESS",
        help="With --tune: run the configs on a Ray cluster ('local', or an address such as "
        "head:6379): each traced here, compiled on the cluster's CPUs, timed and checked on "
        "each chip kind its workers offer; 'none' tunes here whatever the settings say.",
    )
    @argument(
        "--name",
        default=DEFAULT_NAME,
        help=f"Store the inspection under this name (default {DEFAULT_NAME}).",
    )
    @argument(
        "--reproducer",
        metavar="PATH",
        help="Write a standalone script (jax and numpy only) that rebuilds the first "
        "kernel's call, with its operands saved beside it (PATH.npz), and reproduces its "
        "result, or with --target its lowering.",
    )
    @argument(
        "--force",
        action="store_true",
        help="With --reproducer: replace the script and its .npz where they exist (else "
        "nothing is replaced).",
    )
    @argument(
        "--target",
        metavar="T",
        help="Lower the (first) kernel for this target, e.g. ptx:sm_90 or mosaic-tpu:v5e, "
        "and open the IR tab on it; the text is then _kernel.lower(T).text.",
    )
    @argument(
        "--chip",
        metavar="CHIP",
        help="Trace and run the kernels for this GPU or TPU (H100, B200, A100, v6e ...): the "
        "device queries they make while traced (SM count, compute capability, "
        "pltpu.get_tpu_info()) answer as that chip. Default: the device at hand, else the "
        "chip of --target, else an H100 for GPU kernels and the tpu_generation setting for "
        "TPU ones; the inspector's header says which.",
    )
    @argument(
        "--diff",
        metavar="NAME",
        help=f"Compare this cell's inspection with the one kept under NAME (e.g. "
        f"{DEFAULT_NAME}, as the previous version left it): the IR line by line, resources, "
        f"HBM traffic, the check; the diff is kept as '{DIFF_NAME}'.",
    )
    def kernel(self, line: str, cell: str) -> None:
        """Run a cell of Pallas code, then trace, run and inspect its kernels.

        The cell runs as ordinary Python in your namespace. Then CALL, the call on the
        magic line (e.g. add(x, y), evaluated after the cell), is traced (never parsed),
        run on the backend at hand (on CPU in pallaslab's emulator, with the same
        results as Pallas' interpret mode), compared with --ref, and shown in the
        inspector. Without a CALL, the Pallas kernels the cell ran are inspected. The
        inspection is kept as _kernel (or --name); its run's outputs are
        _kernel.result.values.

        Example::

            %%kernel add(x, y) --ref "x + y"
            def add_kernel(x_ref, y_ref, o_ref):
                o_ref[...] = x_ref[...] + y_ref[...]
            ...
        """
        try:
            self._run_cell(line, cell)
        except (KernelCellError, UsageError, KernelInterrupted):
            raise
        except KeyboardInterrupt:
            if "--traceback" in line.split():
                raise
            raise KernelInterrupted() from None
        except Exception as error:
            if "--traceback" in line.split():
                raise
            # Never a raw traceback from pallaslab's own code: one message, and the
            # cell's names (it ran first) stay defined.
            raise KernelCellError(
                Diagnosis(
                    "internal",
                    f"pallaslab failed on this cell: {messages.describe(error)}",
                    "This is a bug in pallaslab, not in your code: the cell itself ran and "
                    "its names are defined. Add --traceback to the magic line to see where, "
                    "and please report it.",
                )
            ) from None

    def _run_cell(self, line: str, cell: str) -> None:
        call, options, space = self._parse(line)
        shell = self.shell
        assert shell is not None
        filename = self._register_cell(line, cell)
        # Taken before the cell runs: the cell replaces `_kernel` with its own inspection.
        before = shell.user_ns.get(options.diff) if options.diff else None
        user_settings = session.cell_settings()

        def name_source(file: str) -> str | None:
            numbers = getattr(shell.compile, "_filename_map", None)
            return sources.message_name(file, numbers, current=filename)

        outcome = execute_cell(
            cell,
            filename=filename,
            namespace=shell.user_ns,
            options=CellOptions(
                call=call,
                ref=options.ref,
                run=not options.no_run,
                # The "interpret" setting (JupyterLab's settings editor) is a default --interpret.
                interpret=options.interpret or user_settings.interpret,
                chip=options.chip,
            ),
            name_source=name_source,
        )
        diagnosis = outcome.diagnosis
        inspection = outcome.inspection
        if outcome.interrupted:
            if options.traceback:
                raise KeyboardInterrupt
            kept = ""
            if inspection is not None:
                shell.user_ns[options.name] = inspection
                kept = f" ({options.name}: the traced kernels, not run)"
            raise KernelInterrupted(kept)
        if inspection is not None:
            shell.user_ns[options.name] = inspection
            if options.target and (inspection.kernels or diagnosis is None):
                # Lowered now, so the IR tab opens on it; a target that cannot take the
                # kernel shows why there (the cell itself did not fail).
                inspection.lower(options.target)
            problem = _problem(diagnosis) if diagnosis else None
            display(Inspector(inspection, problem, selected="ir" if options.target else None))
            if options.diff and diagnosis is None:
                self._keep(
                    DIFF_NAME,
                    diffing.diff_cell(
                        before,
                        inspection,
                        name=options.diff,
                        kept_as=DEFAULT_NAME,
                        target=options.target,
                    ),
                )
        if outcome.last_value is not None and diagnosis is None:
            display(outcome.last_value)
        if options.reproducer and inspection is not None and inspection.kernels:
            written, failed = session.write_reproducer(
                inspection, options.reproducer, options.target, overwrite=options.force
            )
            if failed is None:
                print(written)
            elif diagnosis is None:  # the reproducer was the only thing asked that failed
                diagnosis = failed
            else:
                print(failed.summary, file=sys.stderr)
        if diagnosis is not None:
            if options.traceback and outcome.error is not None:
                raise outcome.error
            raise KernelCellError(diagnosis)
        if inspection is not None and options.bench:
            from pallaslab._src.bench.cells import bench_cell  # noqa: PLC0415 - pandas on use
            from pallaslab._src.views.benchview import DisplayedBench  # noqa: PLC0415

            ref = self._reference(options.ref)
            table = bench_cell(inspection, ref, interpret=options.interpret, live=DisplayedBench())
            shell.user_ns[BENCH_NAME] = table
        if space:
            from pallaslab._src.bench.cells import tune_cell  # noqa: PLC0415 - pandas on use
            from pallaslab._src.views.benchview import DisplayedBench  # noqa: PLC0415

            assert call is not None
            ref = self._reference(options.ref)
            try:
                result = tune_cell(
                    cell,
                    filename=filename,
                    call=call,
                    space=space,
                    namespace=shell.user_ns,
                    name_source=name_source,
                    ref=ref,
                    name=inspection.name if inspection is not None else call,
                    retune=options.retune,
                    interpret=options.interpret,
                    live=DisplayedBench(),
                    cluster=self._cluster(options.cluster, user_settings.tuning_cluster),
                )
            except CellError as error:
                raise KernelCellError(error.diagnosis) from None
            except ClusterError as error:
                raise magic_line_error(f"--cluster: {messages.error_text(error)}") from None
            shell.user_ns[TUNE_NAME] = result

    def _parse(self, line: str) -> tuple[str | None, Any, dict[str, list[Any]]]:
        """The call, the options and the tuning space the magic line asks for.

        Raises:
            UsageError: Naming the magic line, for a line that asks for nothing sane.
        """
        call, rest = split_call(line)
        try:
            options = parse_argstring(self.kernel, rest)
        except UsageError as error:
            known = re.findall(r"\[(--[a-z-]+)", self.kernel.__doc__ or "")
            raise magic_line_error(f"{error}{did_you_mean(str(error), known)}") from None
        except ValueError as error:  # shlex: "No closing quotation"
            raise magic_line_error(
                f"the magic line could not be read: {messages.error_text(error)} "
                "(a quote opened and never closed?)"
            ) from None
        # IPython's argument splitting keeps quotes: --ref "x + y" arrives quoted.
        options.ref = unquote(options.ref)
        if options.call is not None:
            raise magic_line_error(f"unexpected argument {options.call!r}; the call goes first")
        if not options.name.isidentifier():
            raise magic_line_error(f"--name must be a Python name, not {options.name!r}")
        if options.diff is not None and not options.diff.isidentifier():
            raise magic_line_error(
                f"--diff takes the Python name of an inspection, not {options.diff!r}"
            )
        options.target = unquote(options.target)
        if options.target:
            try:
                note = reading_note(options.target)
                target = parse_target(options.target)
            except ValueError as error:
                raise magic_line_error(f"--target: {messages.error_text(error)}") from None
            if note:
                print(f"pallaslab: {note}", file=sys.stderr)
            options.target = target.name
            # The chip a target compiles for is the one to trace for, unless --chip says.
            options.chip = unquote(options.chip) or implied_chip(target) or None
        options.chip = unquote(options.chip)
        if options.chip:
            options.chip = _chip_name(options.chip)
        space = _tune_space(call, options.tune)
        if options.cluster is not None:
            if not space:
                raise magic_line_error(
                    "--cluster runs a tuning sweep on a Ray cluster; give the configs, as in "
                    "%%kernel matmul(a, b) --tune BLOCK_M=64,128 --cluster local"
                )
            self._cluster(options.cluster, "")  # no Ray: one message, before the cell runs
        options.reproducer = unquote(options.reproducer)
        if options.reproducer and call is None:
            raise UsageError(
                "--reproducer rebuilds the call on the magic line; name one, as in "
                "%%kernel matmul(a, b) --reproducer bug.py"
            )
        if options.no_run and (options.bench or options.tune):
            flag = "--bench" if options.bench else "--tune"
            raise magic_line_error(
                f"--no-run traces only, and {flag} runs the call: drop one of the two"
            )
        if options.bench and call is None:
            raise magic_line_error(
                "--bench times the call on the magic line; name one, as in "
                "%%kernel matmul(a, b) --bench"
            )
        return call, options, space

    @staticmethod
    def _cluster(given: str | None, setting: str) -> Any:
        """The cluster `--cluster` (else the "Tuning cluster" setting) names, or None.

        Raises:
            UsageError: Naming the magic line, when Ray is not installed.
        """
        from pallaslab._src.bench.cluster.spec import cluster_spec  # noqa: PLC0415

        try:
            return cluster_spec(unquote(given) if given is not None else setting)
        except ClusterError as error:
            raise magic_line_error(f"--cluster: {messages.error_text(error)}") from None

    def _keep(self, name: str, found: Any) -> None:
        """Keeps and shows what a flag made; a sentence instead goes to stderr."""
        shell = self.shell
        assert shell is not None
        if isinstance(found, str):
            print(found, file=sys.stderr)
            return
        shell.user_ns[name] = found
        display(found)

    def _reference(self, expression: str | None) -> Any:
        shell = self.shell
        assert shell is not None
        try:
            return session.evaluate_reference(expression, shell.user_ns)
        except CellError as error:
            raise KernelCellError(error.diagnosis) from None

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


def _tune_space(call: str | None, tokens: list[str] | None) -> dict[str, list[Any]]:
    if not tokens:
        return {}
    if call is None:
        raise magic_line_error(
            "--tune runs the call on the magic line for each config; name "
            "one, as in %%kernel matmul(a, b) --tune BLOCK_M=64,128"
        )
    from pallaslab._src.bench.tune import parse_space  # noqa: PLC0415 - pandas on use

    try:
        return parse_space(tokens)
    except ValueError as error:
        raise magic_line_error(messages.error_text(error)) from None


def _chip_name(name: str) -> str:
    """The hardware table's name of the chip `--chip` names (UsageError if none)."""
    for lookup in (hardware.gpu, hardware.tpu):
        try:
            return lookup(name).name
        except KeyError:
            continue
    raise magic_line_error(
        f"--chip: no chip {name!r} in pallaslab's hardware table; GPUs: "
        f"{', '.join(hardware.GPUS)}; TPUs: {', '.join(hardware.TPUS)}"
    )


def _problem(diagnosis: Diagnosis) -> Problem:
    where = f"{diagnosis.label} {diagnosis.line}" if diagnosis.label and diagnosis.line else ""
    return Problem(where=where, summary=diagnosis.summary, hint=diagnosis.hint, kind=diagnosis.kind)


def load(shell: Any) -> None:
    """Registers the magic; kernels run on CPU in pallaslab's emulator.

    The magic is registered first: nothing the settings hold can stop it.
    """
    shell.register_magics(KernelMagics)
    try:
        session.cell_settings()
    except Exception as error:  # every cell reads the settings again, and says why
        print(f"pallaslab: settings not applied: {messages.one_line(error)}", file=sys.stderr)
