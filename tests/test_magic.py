"""The %%kernel magic through IPython's testing shell: runs, options and every error."""

from __future__ import annotations

import textwrap

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pallaslab._src.magic import KernelCellError, split_call, unquote

PRELUDE = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
"""

ADD_CELL = (
    PRELUDE
    + """
def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
                     grid=(8,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
                     out_specs=pl.BlockSpec((128,), lambda i: (i,)))
x = jnp.arange(1024.0); y = 2 * x
"""
)


def run(ip, line: str, body: str):
    """Runs a %%kernel cell; returns (result, captured displays)."""
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel {line}\n{textwrap.dedent(body)}")
    return result, captured


def error_of(result) -> KernelCellError:
    assert isinstance(result.error_in_exec, KernelCellError), repr(result.error_in_exec)
    return result.error_in_exec


def line_of(cell_body: str, needle: str) -> int:
    """The cell line (magic line = 1) of the first line containing `needle`."""
    for number, text in enumerate(cell_body.splitlines(), start=2):
        if needle in text:
            return number
    raise AssertionError(needle)


# --- Runs that work ----------------------------------------------------------


def test_the_issue_example(ip):
    result, captured = run(ip, 'add(x, y) --ref "x + y"', ADD_CELL)
    assert result.success, result.error_in_exec
    # The cell ran as ordinary Python in the user's namespace.
    assert {"add", "x", "y", "add_kernel"} <= set(ip.user_ns)
    inspection = ip.user_ns["_kernel"]
    assert inspection.kernels[0].grid == (8,)
    assert inspection.result.backend == "cpu"
    assert inspection.result.comparison.ok
    assert inspection.result.values[0].shape == (1024,)
    # The inspector was displayed, with its static fallback.
    bundles = [o.data for o in captured.outputs]
    assert any("application/vnd.jupyter.widget-view+json" in b for b in bundles)
    assert any("matches the reference" in b.get("text/plain", "") for b in bundles)


def test_ref_may_be_a_callable(ip):
    result, _ = run(ip, "add(x, y) --ref ref", ADD_CELL + "ref = lambda a, b: a + b\n")
    assert result.success, result.error_in_exec
    assert ip.user_ns["_kernel"].result.comparison.ok


def test_without_a_call_the_cells_own_kernels_are_inspected(ip):
    result, _ = run(ip, "", ADD_CELL + "out = add(x, y)\n")
    assert result.success, result.error_in_exec
    inspection = ip.user_ns["_kernel"]
    assert [k.name for k in inspection.kernels] == ["add_kernel"]
    assert ip.user_ns["out"].shape == (1024,)


def test_no_run_name_and_interpret_options(ip):
    result, _ = run(ip, "add(x, y) --no-run --name insp --interpret", ADD_CELL)
    assert result.success, result.error_in_exec
    assert ip.user_ns["insp"].result is None
    assert ip.user_ns["insp"].kernels[0].name == "add_kernel"


def test_last_expression_is_displayed(ip):
    result, captured = run(ip, "add(x, y)", ADD_CELL + "x.shape\n")
    assert result.success
    assert any(o.data.get("text/plain") == "(1024,)" for o in captured.outputs)


def test_a_cell_without_kernels_says_so(ip):
    result, _ = run(ip, "", "z = 1 + 1\n")
    assert result.success
    assert "ran no Pallas kernel" in ip.user_ns["_kernel"].notices[0]


def test_help_lists_the_options(ip):
    doc = ip.find_cell_magic("kernel").__doc__
    for option in ("--ref", "--no-run", "--interpret", "--traceback", "--name"):
        assert option in doc
    with capture_output() as captured:
        ip.run_cell("%%kernel?")
    # IPython's testing shell pages the help to stdout (no rich outputs).
    assert captured.outputs == []
    assert captured.stdout.startswith("Docstring:")
    for option in ("--ref", "--no-run", "--interpret", "--traceback", "--name", "--bench"):
        assert option in captured.stdout, option
    for option in ("--tune", "--retune", "--target", "--diff", "--reproducer"):
        assert option in captured.stdout, option


def test_bad_options_are_usage_errors(ip):
    result, _ = run(ip, "add(x, y) --bogus", ADD_CELL)
    assert isinstance(result.error_in_exec, UsageError)
    result, _ = run(ip, "add(x, y) --name 3x", ADD_CELL)
    assert isinstance(result.error_in_exec, UsageError)


def test_split_call_and_unquote():
    assert split_call('add(x, y) --ref "x + y"') == ("add(x, y)", '--ref "x + y"')
    assert split_call("f(x, key='a b') --no-run") == ("f(x, key='a b')", "--no-run")
    assert split_call("--no-run") == (None, "--no-run")
    assert split_call("") == (None, "")
    assert split_call("jax.jit(f)(x)") == ("jax.jit(f)(x)", "")
    assert unquote('"x + y"') == "x + y" and unquote("'a'") == "a" and unquote("x") == "x"


# --- Errors that teach: one message, the right cell line, nothing lost. ------


def test_syntax_error(ip):
    body = PRELUDE + "def k(x_ref, o_ref)\n    o_ref[...] = x_ref[...]\n"
    result, _ = run(ip, "", body)
    error = error_of(result)
    assert error.diagnosis.kind == "syntax"
    assert str(error).startswith(f"Cell line {line_of(body, 'def k')}: SyntaxError")


def test_undefined_name_in_the_call(ip):
    result, _ = run(ip, "addd(x, y)", ADD_CELL)
    error = error_of(result)
    assert error.diagnosis.kind == "undefined-name"
    assert str(error).startswith("Cell line 1: name 'addd' is not defined")
    assert "Did you mean 'add'?" in str(error)
    assert "add" in ip.user_ns  # the cell body ran before the call was evaluated


BLOCK_RANK = (
    PRELUDE
    + """
def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

copy = pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
                      grid=(8,),
                      in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
                      out_specs=pl.BlockSpec((128,), lambda i: (i,)))
x = jnp.arange(1024.0)
"""
)


def test_block_shape_that_does_not_fit_the_array(ip):
    result, _ = run(ip, "copy(x)", BLOCK_RANK)
    error = error_of(result)
    assert error.diagnosis.kind == "block-shape"
    assert error.diagnosis.line == line_of(BLOCK_RANK, "BlockSpec((128, 128)")
    assert "block shape (128, 128) of input 0 does not fit its array of shape (1024,)" in str(error)


def test_block_that_starts_past_the_end_of_the_array(ip):
    body = BLOCK_RANK.replace("grid=(8,)", "grid=(16,)").replace(
        "pl.BlockSpec((128, 128), lambda i: (i, 0))", "pl.BlockSpec((128,), lambda i: (i,))"
    )
    result, captured = run(ip, "copy(x)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "block-out-of-bounds"
    assert error.diagnosis.line == line_of(body, "in_specs=")
    assert "program (8,) covers elements 1024..1151" in str(error)
    # The inspection is kept and shown, so the tiles can be looked at.
    assert ip.user_ns["_kernel"].kernels[0].grid == (16,)
    assert captured.outputs


def test_index_map_with_the_wrong_number_of_indices(ip):
    body = ADD_CELL.replace(
        "in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2",
        "in_specs=[pl.BlockSpec((128,), lambda i: (i, 0))] * 2",
    )
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "index-map-results"
    assert error.diagnosis.line == line_of(body, "in_specs=")
    assert "returns 2 block indices, but its block shape has 1 dimension" in str(error)


def test_kernel_that_returns_a_value(ip):
    body = ADD_CELL.replace(
        "    o_ref[...] = x_ref[...] + y_ref[...]",
        "    o_ref[...] = x_ref[...] + y_ref[...]\n    return o_ref[...]",
    )
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "kernel-returns"
    assert error.diagnosis.line == line_of(body, "def add_kernel")
    assert "Pallas kernels return nothing" in str(error)


def test_python_if_on_a_traced_value(ip):
    body = ADD_CELL.replace(
        "    o_ref[...] = x_ref[...] + y_ref[...]",
        "    if x_ref[0] > 0:\n        o_ref[...] = x_ref[...] + y_ref[...]",
    )
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "traced-if"
    assert error.diagnosis.line == line_of(body, "if x_ref[0]")
    assert "pl.when" in str(error) and "lax.cond" in str(error)


def test_wrong_number_of_kernel_arguments(ip):
    body = ADD_CELL.replace("def add_kernel(x_ref, y_ref, o_ref):", "def add_kernel(x_ref, o_ref):")
    body = body.replace("x_ref[...] + y_ref[...]", "x_ref[...]")
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "kernel-arity"
    assert error.diagnosis.line == line_of(body, "def add_kernel")
    assert (
        "does not take the 3 refs this pallas_call passes (2 inputs, 1 output, 0 scratch)"
        in str(error)
    )


def test_reference_with_a_different_shape(ip):
    result, _ = run(ip, 'add(x, y) --ref "(x + y)[:10]"', ADD_CELL)
    error = error_of(result)
    assert error.diagnosis.kind == "reference"
    assert str(error).startswith(
        "Cell line 1: --ref does not match add_kernel: the reference has shape (10,)"
    )


def test_reference_with_a_different_dtype(ip):
    result, _ = run(ip, 'add(x, y) --ref "(x + y).astype(jnp.bfloat16)"', ADD_CELL)
    error = error_of(result)
    assert "the reference has dtype bfloat16 but the program returns float32" in str(error)


def test_kernel_that_raises_inside(ip):
    body = ADD_CELL.replace(
        "    o_ref[...] = x_ref[...] + y_ref[...]",
        "    raise ValueError('block size must be a multiple of 8')",
    )
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.line == line_of(body, "raise ValueError")
    assert "ValueError: block size must be a multiple of 8" in str(error)
    assert "Raised while tracing kernel add_kernel" in str(error)


def test_error_in_the_cell_body_itself(ip):
    body = "a = 1\nb = a / 0\nc = 3\n"
    result, _ = run(ip, "", body)
    error = error_of(result)
    assert str(error).startswith("Cell line 3: ZeroDivisionError")
    assert ip.user_ns["a"] == 1 and "c" not in ip.user_ns


def test_store_of_the_wrong_shape(ip):
    body = ADD_CELL.replace("x_ref[...] + y_ref[...]", "(x_ref[...] + y_ref[...]).reshape(2, 64)")
    result, _ = run(ip, "add(x, y)", body)
    error = error_of(result)
    assert error.diagnosis.kind == "store-shape"
    assert error.diagnosis.line == line_of(body, "reshape(2, 64)")


def test_namespace_and_earlier_results_survive_failures(ip):
    ok, _ = run(ip, "add(x, y)", ADD_CELL)
    assert ok.success
    earlier = ip.user_ns["_kernel"]
    body = ADD_CELL + "before_failure = 42\n"
    bad, _ = run(ip, "addd(x, y)", body)
    assert not bad.success
    assert ip.user_ns["before_failure"] == 42
    assert ip.user_ns["_kernel"] is earlier  # the failed cell did not replace it
    again, _ = run(ip, 'add(x, y) --ref "x + y"', ADD_CELL)
    assert again.success and ip.user_ns["_kernel"].result.comparison.ok


def test_traceback_option_raises_the_original_error(ip):
    result, _ = run(ip, "addd(x, y) --traceback", ADD_CELL)
    assert isinstance(result.error_in_exec, NameError)


def test_kernel_error_renders_without_a_traceback(ip):
    result, _ = run(ip, "addd(x, y)", ADD_CELL)
    lines = error_of(result)._render_traceback_()
    assert "KernelError" in lines[0] and "Cell line 1" in lines[0]
    assert not any("Traceback" in line for line in lines)


@pytest.mark.parametrize("call", ["x", "add(x,"])
def test_a_call_that_is_not_a_call(ip, call):
    result, _ = run(ip, call, ADD_CELL)
    error = error_of(result)
    assert error.diagnosis.line == 1
