"""The %%kernel magic on Mosaic GPU kernels, through IPython's testing shell.

One inspector per cell, no raw traceback, errors at the kernel's line; the chip the
kernels were traced for in the header; the Run tab saying how and why.
"""

from __future__ import annotations

import textwrap

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pallaslab._src.magic import KernelCellError
from pallaslab._src.views.header import header

PRELUDE = """\
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
"""

PERSISTENT = (
    PRELUDE
    + """
def double(x):
    sms = jax.devices()[0].core_count  # one program per SM

    def body(x_gmem, o_gmem, x_smem, o_smem, loaded):
        @plgpu.nd_loop((x.shape[0] // 16,), collective_axes="sm")
        def _tile(info):
            (t,) = info.index
            window = pl.ds(t * 16, 16)
            plgpu.copy_gmem_to_smem(x_gmem.at[window], x_smem, loaded)
            plgpu.barrier_wait(loaded)
            o_smem[...] = x_smem[...] * 2.0
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[window])
            plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(sms,),
        grid_names=("sm",),
        scratch_types=[
            plgpu.SMEM((16, 128), x.dtype),
            plgpu.SMEM((16, 128), x.dtype),
            plgpu.Barrier(num_arrivals=1),
        ],
    )(x)

x = jnp.ones((64, 128))
"""
)

OUT_OF_BOUNDS = (
    PRELUDE
    + """
def body(x_ref, o_ref):
    i = lax.axis_index("b")
    o_ref[pl.ds(i * 64 + 32, 64)] = x_ref[pl.ds(i * 64, 64)]

shift = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                     grid=(2,), grid_names=("b",))
x = jnp.arange(128.0)
"""
)

RACY = (
    PRELUDE
    + """
def body(x_ref, o_ref, smem):
    t = lax.axis_index("t")
    smem[...] = x_ref[...] + t.astype(jnp.float32)
    o_ref[...] = smem[...]

racy = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                    num_threads=2, thread_name="t",
                    scratch_types=[plgpu.SMEM((128,), jnp.float32)])
x = jnp.arange(128.0)
"""
)


def run(ip, line: str, body: str):
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel {line}\n{textwrap.dedent(body)}")
    return result, captured


def line_of(cell: str, needle: str) -> int:
    """The cell line (magic line = 1) of the first line containing `needle`."""
    for number, text in enumerate(cell.splitlines(), start=2):
        if needle in text:
            return number
    raise AssertionError(needle)


def inspectors(captured) -> int:
    return sum("application/vnd.jupyter.widget-view+json" in o.data for o in captured.outputs)


def test_a_persistent_kernel_runs_in_the_interpreter_for_the_default_gpu(ip):
    result, captured = run(ip, 'double(x) --ref "x * 2"', PERSISTENT)
    assert result.success, result.error_in_exec
    assert inspectors(captured) == 1 and "Traceback" not in captured.stdout + captured.stderr
    inspection = ip.user_ns["_kernel"]
    assert inspection.kernels[0].grid == (132,)  # an H100's SMs
    assert inspection.result.mode == "mosaic-gpu-interpret" and inspection.result.comparison.ok
    assert "for H100 (the default without a GPU)" in header(inspection)["badges"]
    plain = next(o.data["text/plain"] for o in captured.outputs if "text/plain" in o.data)
    assert "mosaic-gpu-interpret" in plain and "traced for H100" in plain


def test_chip_picks_the_gpu_and_target_implies_one(ip):
    result, _ = run(ip, "double(x) --chip B200 --no-run", PERSISTENT)
    assert result.success, result.error_in_exec
    inspection = ip.user_ns["_kernel"]
    assert inspection.kernels[0].grid == (148,)
    assert (inspection.chip, inspection.chip_note) == ("B200", "chosen")
    # ptx:sm_100 is a B200's architecture: the kernels are traced for one.
    result, _ = run(ip, "double(x) --target ptx:sm_100 --no-run", PERSISTENT)
    assert result.success, result.error_in_exec
    assert ip.user_ns["_kernel"].kernels[0].grid == (148,)
    # --chip wins over the target's.
    run(ip, "double(x) --target xla-gpu:B200 --chip A100 --no-run", PERSISTENT)
    assert ip.user_ns["_kernel"].kernels[0].grid == (108,)


def test_the_run_tab_says_why_there_is_no_run(ip):
    from pallaslab._src.views.tabs import run as run_tab

    run(ip, "double(x) --no-run", PERSISTENT)
    message = run_tab.payload(ip.user_ns["_kernel"])["message"]
    assert message.startswith("Not run: --no-run was given")
    result, _ = run(ip, "shift(x)", OUT_OF_BOUNDS)
    assert not result.success
    message = run_tab.payload(ip.user_ns["_kernel"])["message"]
    assert message == "Not run: the run failed (the error is shown above)."
    assert "--no-run" not in message


def test_an_unknown_chip_is_a_magic_line_mistake(ip):
    result, _ = run(ip, "double(x) --chip Z9", PERSISTENT)
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec).startswith("Cell line 1: --chip: no chip 'Z9'")
    assert "H100" in str(result.error_in_exec)


def test_a_failing_kernel_is_one_message_at_its_line_not_line_1(ip):
    result, captured = run(ip, "shift(x)", OUT_OF_BOUNDS)
    error = result.error_in_exec
    assert isinstance(error, KernelCellError), repr(error)
    diagnosis = error.diagnosis
    assert diagnosis.kind == "out-of-bounds"
    # The store's line (the kernel's only store: JAX names no line for it).
    assert diagnosis.line == line_of(OUT_OF_BOUNDS, "o_ref[pl.ds")
    assert diagnosis.line != 1 and diagnosis.label.startswith("Cell")
    assert inspectors(captured) == 1
    assert "Traceback" not in captured.stdout + captured.stderr
    assert len(error.diagnosis.message().splitlines()) <= 12
    assert {"shift", "x", "body"} <= set(ip.user_ns)  # the cell's names survive


def test_races_appear_in_the_run_tab_at_the_cells_lines(ip):
    from pallaslab._src.views.tabs import run as run_tab

    result, captured = run(ip, "racy(x)", RACY)
    assert result.success, result.error_in_exec
    assert "RACE DETECTED" not in captured.stdout  # taken as findings, not printed
    model = run_tab.payload(ip.user_ns["_kernel"])["result"]
    lines = {race["where"]["line"] for race in model["interpreterRaces"] if race["where"]}
    assert line_of(RACY, "smem[...] = x_ref") in lines
    assert all(race["where"]["label"].startswith("Cell") for race in model["interpreterRaces"])


def test_a_cell_running_its_mosaic_gpu_kernel_is_inspected(ip):
    # Run in the cell, the kernel asks for the SM count of a GPU that is not here.
    result, _ = run(ip, "", PERSISTENT + "out = double(x)\n")
    diagnosis = result.error_in_exec.diagnosis
    assert diagnosis.kind == "no-gpu" and diagnosis.line == line_of(PERSISTENT, "core_count")
    assert "--chip H100" in diagnosis.hint
    result, _ = run(ip, "--chip H100", PERSISTENT + "out = double(x)\n")
    assert result.success, result.error_in_exec
    assert float(ip.user_ns["out"].sum()) == 2 * 64 * 128
    (kernel,) = ip.user_ns["_kernel"].kernels
    assert kernel.kind == "plgpu.kernel"


@pytest.mark.parametrize("flag", ["--interpret", ""])
def test_forced_interpret_still_takes_the_mosaic_gpu_interpreter(ip, flag):
    result, _ = run(ip, f'shift2(x) --ref "x + 1" {flag}', PRELUDE + _SHIFT2)
    assert result.success, result.error_in_exec
    assert ip.user_ns["_kernel"].result.mode == "mosaic-gpu-interpret"


_SHIFT2 = """
def body(x_ref, o_ref):
    i = lax.axis_index("b")
    o_ref[pl.ds(i * 64, 64)] = x_ref[pl.ds(i * 64, 64)] + 1

shift2 = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                      grid=(2,), grid_names=("b",))
x = jnp.arange(128.0)
"""
