"""Every bad input through `%%kernel`: one short message, the right line, nothing lost.

A table of (magic line, cell body, the cell line the user would point at, a phrase of
the message). The lines are counted by hand: the magic line is line 1, the prelude
lines 2-4, so a body's first line is line 5. `copy_body` keeps each piece of its
pallas_call on its own line:

    5  def copy_kernel(x_ref, o_ref):
    6      <kernel line>
    7  x = jnp.arange(1024.0)
    8  copy = pl.pallas_call(<kernel>, out_shape=<out_shape>,
    9      grid=<grid>,
    10     in_specs=<in_specs>,
    11     out_specs=<out_specs>)

For each case: the error is one message (a `KernelError` or a `UsageError`) of at
most 15 lines, without a traceback or IPython's cell file names; it names the line;
names defined before the failure are still defined, `_kernel` is the previous one
unless the failed cell showed an inspector of its own (then it is that one: each case
says which, `shows`); and the next cell works.
"""

from __future__ import annotations

import dataclasses
import textwrap

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pallaslab._src.core.inspection import Inspection
from pallaslab._src.magic import KernelCellError

PRELUDE = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
marker = "defined before the failure"
"""
FIRST_BODY_LINE = 5
SPEC = "pl.BlockSpec((128,), lambda i: (i,))"


def copy_body(
    kernel_line: str = "    o_ref[...] = x_ref[...]",
    *,
    kernel: str = "copy_kernel",
    out_shape: str = "jax.ShapeDtypeStruct((1024,), jnp.float32)",
    grid: str = "(8,)",
    in_specs: str = f"[{SPEC}]",
    out_specs: str = SPEC,
    signature: str = "x_ref, o_ref",
    after: str = "",
) -> str:
    """The copy kernel's cell body, one piece per line (see the module docstring)."""
    return (
        f"def copy_kernel({signature}):\n"
        f"{kernel_line}\n"
        "x = jnp.arange(1024.0)\n"
        f"copy = pl.pallas_call({kernel}, out_shape={out_shape},\n"
        f"    grid={grid},\n"
        f"    in_specs={in_specs},\n"
        f"    out_specs={out_specs})\n"
        f"{after}"
    )


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input: the magic line, the body, the line to name, a phrase to find."""

    name: str
    line: str
    body: str
    expected_line: int
    phrase: str
    # Whether the cell's body runs (not for a syntax error or a bad magic line).
    runs: bool = True
    # Whether the kernel traced and the inspector shows before the failure (a run, a
    # check or a tuning that fails): `_kernel` is then that inspection.
    shows: bool = False


CASES = [
    # --- The magic line --------------------------------------------------------
    Case("unknown option", "copy(x) --bogus", copy_body(), 1, "unrecognized arguments", False),
    Case("bad --name", "copy(x) --name 3x", copy_body(), 1, "must be a Python name", False),
    Case("unbalanced quote", 'copy(x) --ref "x', copy_body(), 1, "never closed", False),
    Case("unbalanced quote in --name", 'copy(x) --name "abc', copy_body(), 1, "quote", False),
    Case(
        "argument after the options", "copy(x) extra", copy_body(), 1, "the call goes first", False
    ),
    Case("--bench without a call", "--bench", copy_body(), 1, "--bench times the call", False),
    Case("--tune without a call", "--tune B=1,2", copy_body(), 1, "--tune runs the call", False),
    Case("--tune without values", "copy(x) --tune B", copy_body(), 1, "NAME=V1,V2", False),
    Case("unknown --target", "copy(x) --target nonsense:x", copy_body(), 1, "--target", False),
    Case(
        "--tune of a name never read",
        "copy(x) --tune BLOCK=64,128",
        copy_body(),
        1,
        "never reads",
        shows=True,
    ),
    Case("undefined function in the call", "copyy(x)", copy_body(), 1, "Did you mean 'copy'?"),
    Case("call that is not a call", "x", copy_body(), 1, "is not a call"),
    Case("call that is not Python", "copy(x,", copy_body(), 1, "not Python"),
    Case("--ref without a call", '--ref "x"', copy_body(), 1, "--ref compares the result"),
    Case(
        "--ref of another shape",
        'copy(x) --ref "x[:10]"',
        copy_body(),
        1,
        "shape (10,)",
        shows=True,
    ),
    Case(
        "--ref of another dtype",
        'copy(x) --ref "x.astype(jnp.int32)"',
        copy_body(),
        1,
        "dtype int32",
        shows=True,
    ),
    Case(
        "--ref that fails",
        'copy(x) --ref "undefined_ref"',
        copy_body(),
        1,
        "'undefined_ref'",
        shows=True,
    ),
    Case("call with one argument too many", "copy(x, x)", copy_body(), 10, "different structures"),
    Case(
        "call on an array too short", "copy(x[:100])", copy_body(), 10, "has only 100", shows=True
    ),
    # --- The cell's own Python --------------------------------------------------
    Case("syntax error", "", copy_body("    o_ref[...] = = x_ref[...]"), 6, "SyntaxError", False),
    Case(
        "misspelt module function",
        "copy(x)",
        copy_body(after="y = jnp.arangee(4)\n"),
        12,
        "arangee",
    ),
    Case("division by zero", "", "a = 1\nb = a / 0\n", 6, "ZeroDivisionError"),
    Case(
        "undefined name in the body",
        "",
        copy_body(after="y = cpy\n"),
        12,
        "Did you mean 'copy'?",
    ),
    Case(
        "exception whose __str__ raises",
        "",
        "class Broken(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
        "raise Broken()\n",
        8,
        "could not be shown",
    ),
    Case("a megabyte of message", "", "raise ValueError('x' * 1_000_000)\n", 5, "more characters"),
    Case(
        "ten thousand lines of message",
        "",
        "raise ValueError('line\\n' * 10_000)\n",
        5,
        "ValueError: line",
    ),
    # --- The kernel body --------------------------------------------------------
    Case(
        "kernel returns a value", "copy(x)", copy_body("    return x_ref[...]"), 5, "return nothing"
    ),
    Case(
        "Python if on a traced value",
        "copy(x)",
        copy_body("    o_ref[...] = x_ref[...] if x_ref[0] > 0 else -x_ref[...]"),
        6,
        "pl.when",
    ),
    Case("kernel missing a ref", "copy(x)", copy_body("    pass", signature="x_ref"), 5, "2 refs"),
    Case(
        "store of the wrong shape",
        "copy(x)",
        copy_body("    o_ref[...] = x_ref[...].reshape(2, 64)"),
        6,
        "shape (2, 64)",
    ),
    Case(
        "kernel raises",
        "copy(x)",
        copy_body("    raise ValueError('block size must be a multiple of 8')"),
        6,
        "multiple of 8",
    ),
    Case(
        "undefined name in the kernel",
        "copy(x)",
        copy_body("    o_ref[...] = y_ref[...]"),
        6,
        "'y_ref' is not defined",
    ),
    Case(
        "exception whose __str__ raises, in the kernel",
        "copy(x)",
        "class Broken(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
        + copy_body("    raise Broken()"),
        9,
        "could not be shown",
    ),
    Case(
        "matmul of mismatched shapes",
        "copy(x)",
        copy_body("    o_ref[...] = jnp.dot(x_ref[...], x_ref[...][:64])"),
        6,
        "dot_general",
    ),
    # --- BlockSpecs, grids and pallas_call arguments ----------------------------
    Case(
        "block shape of another rank",
        "copy(x)",
        copy_body(in_specs="[pl.BlockSpec((128, 128), lambda i: (i, 0))]"),
        10,
        "does not fit its array",
    ),
    Case(
        "index map returning too many indices",
        "copy(x)",
        copy_body(in_specs="[pl.BlockSpec((128,), lambda i: (i, 0))]"),
        10,
        "returns 2 block indices",
    ),
    Case(
        "index map returning floats",
        "copy(x)",
        copy_body(in_specs="[pl.BlockSpec((128,), lambda i: (i * 1.0,))]"),
        10,
        "must be integers",
    ),
    Case(
        "index map with too many arguments",
        "copy(x)",
        copy_body(in_specs="[pl.BlockSpec((128,), lambda i, j: (i,))]"),
        10,
        "takes 2 arguments (i, j)",
    ),
    Case(
        "index map with too few arguments",
        "copy(x)",
        copy_body(grid="(8, 1)", out_specs="pl.BlockSpec((128,), lambda i, j: (i,))"),
        10,
        "takes 1 argument (i)",
    ),
    Case(
        "BlockSpec in the old argument order",
        "copy(x)",
        copy_body(in_specs="[pl.BlockSpec(lambda i: (i,), (128,))]"),
        10,
        "the order changed",
    ),
    Case(
        "out_specs and out_shape of different structures",
        "copy(x)",
        copy_body(out_specs=f"[{SPEC}, {SPEC}]"),
        11,
        "out_specs and out_shape have different structures",
    ),
    Case(
        "in_specs for more inputs than given",
        "copy(x)",
        copy_body(in_specs=f"[{SPEC}, {SPEC}]"),
        10,
        "in_specs and the arguments have different structures",
    ),
    Case("pallas_call of an int", "copy(x)", copy_body(kernel="42"), 8, "42 (an int)"),
    Case(
        "pallas_call of a string",
        "",
        copy_body(kernel="'copy_kernel'", after="y = copy(x)\n"),
        8,
        "(a str)",
    ),
    Case("negative grid", "copy(x)", copy_body(grid="(-1,)"), 9, "cannot be negative", shows=True),
    Case(
        "block past the end",
        "copy(x)",
        copy_body(grid="(16,)"),
        10,
        "covers elements 1024..1151",
        shows=True,
    ),
    Case(
        "a grid too large to run",
        "copy(x)",
        copy_body(
            grid="(2**40,)",
            in_specs="[pl.BlockSpec((128,), lambda i: (0,))]",
            out_specs="pl.BlockSpec((128,), lambda i: (0,))",
        ),
        1,
        "1,099,511,627,776 programs",
        shows=True,
    ),
    # --- JAX errors while running or emulating ------------------------------------
    Case(
        "operation with no CPU lowering",
        "copy(x)",
        copy_body(
            "    from jax.experimental.pallas import tpu as pltpu; pltpu.prng_seed(0); "
            "o_ref[...] = x_ref[...]"
        ),
        6,
        "prng_seed",
        shows=True,
    ),
    Case(
        "callback that raises while running",
        "copy(x)",
        copy_body(
            "    jax.debug.callback(lambda v: 1 // int(v), 0 * x_ref[0]); o_ref[...] = x_ref[...]"
        ),
        6,
        "ZeroDivisionError",
        shows=True,
    ),
]


def run_cell(ip, line: str, body: str):
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel {line}\n{PRELUDE}{textwrap.dedent(body)}")
    return result, captured


def message_of(error: BaseException) -> tuple[str, int | None]:
    """The text the user sees and the line it names."""
    if isinstance(error, KernelCellError):
        lines = error._render_traceback_()
        return "\n".join(lines), error.diagnosis.line
    assert isinstance(error, UsageError), repr(error)
    text = str(error)
    assert text.startswith("Cell line "), text
    return text, int(text.split(":", 1)[0].removeprefix("Cell line "))


def test_the_table_has_at_least_forty_cases():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(ip, case):
    previous = object()
    ip.user_ns["_kernel"] = previous
    ip.user_ns["from_an_earlier_cell"] = 41
    result, captured = run_cell(ip, case.line, case.body)

    error = result.error_in_exec
    assert error is not None, f"{case.name}: no error"
    text, line = message_of(error)
    # One message, short, without a traceback or IPython's file names.
    assert len(text.splitlines()) <= 12, text
    assert len(text) <= 4000, len(text)
    assert "Traceback" not in text and "<ipython-input" not in text, text
    assert "Traceback (most recent call last)" not in captured.stdout + captured.stderr
    # The right line and the right words.
    assert line == case.expected_line, text
    assert text.startswith(("\x1b[0;31mKernelError\x1b[0m: ", "Cell line ")), text
    assert f"Cell line {case.expected_line}:" in text, text
    assert case.phrase in text, text
    # Nothing lost: earlier names, the names the cell defined before failing, and
    # the previous inspection (unless this cell showed its own).
    assert ip.user_ns["from_an_earlier_cell"] == 41
    if case.runs:
        assert ip.user_ns["marker"] == "defined before the failure"
    shown = any("application/vnd.jupyter.widget-view+json" in o.data for o in captured.outputs)
    kept = ip.user_ns["_kernel"]
    assert shown == case.shows
    if case.shows:
        assert isinstance(kept, Inspection) and kept is not previous, kept
    else:
        assert kept is previous, kept

    # The next cell works.
    ok, _ = run_cell(ip, 'copy(x) --ref "x"', copy_body())
    assert ok.success, ok.error_in_exec
    assert ip.user_ns["_kernel"].result.comparison.ok


def test_a_failure_inside_pallaslab_is_one_message_and_loses_nothing(ip, monkeypatch):
    from pallaslab._src import magic

    class Boom(Exception):  # noqa: N818 - a stand-in for any bug
        def __str__(self) -> str:
            return "inspector exploded\n" * 1000

    def broken(*args, **kwargs):
        raise Boom()

    monkeypatch.setattr(magic, "Inspector", broken)
    result, captured = run_cell(ip, "copy(x)", copy_body())
    error = result.error_in_exec
    assert isinstance(error, KernelCellError) and error.diagnosis.kind == "internal"
    text = "\n".join(error._render_traceback_())
    assert "pallaslab failed on this cell: Boom: inspector exploded" in text
    assert "bug in pallaslab" in text and len(text.splitlines()) <= 12
    assert "Traceback" not in captured.stdout + captured.stderr
    assert ip.user_ns["marker"] == "defined before the failure"
    # --traceback shows the original exception.
    result, _ = run_cell(ip, "copy(x) --traceback", copy_body())
    assert isinstance(result.error_in_exec, Boom)


def test_a_magic_line_mistake_prints_one_line(ip):
    result, captured = run_cell(ip, 'copy(x) --ref "x', copy_body())
    assert type(result.error_in_exec) is UsageError  # IPython prints exactly this type plainly
    assert captured.stderr.strip().splitlines() == [
        "UsageError: Cell line 1: the magic line could not be read: No closing quotation "
        "(a quote opened and never closed?)"
    ]
