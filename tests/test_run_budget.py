"""Kernels that never end: the run budget, and interrupts that leave the session usable.

Kernels of our own: a Collatz walk (finite, a different number of steps per program,
and one program whose start, 0, never reaches 1) and a countdown whose condition
never changes. Oracles: plain NumPy for the finite walks, the kernel's own source
line for the report, and a real IPython kernel (jupyter_client) for the interrupt.
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import run_budget
from pallaslab._src.core.jax_adapter import loop_budget

BUDGET = 20_000


@pytest.fixture(autouse=True)
def small_budget():
    before = run_budget.run_budget()
    pallaslab.set_run_budget(loop_iterations=BUDGET, seconds=None)
    yield
    pallaslab.set_run_budget(loop_iterations=before.loop_iterations, seconds=before.seconds)


def collatz_kernel(x_ref, o_ref):
    def steps(n):
        def cond(c):
            return c[0] != 1

        def body(c):
            value, count = c
            return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), count + 1

        return jax.lax.while_loop(cond, body, (n, jnp.int32(0)))[1]  # COLLATZ LOOP

    o_ref[0] = steps(x_ref[0])


def collatz(x):
    return pl.pallas_call(
        collatz_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
        grid=(x.shape[0],),
        in_specs=[pl.BlockSpec((1,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
    )(x)


def numpy_collatz(n: int) -> int:
    count = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        count += 1
    return count


def countdown_kernel(x_ref, o_ref):
    # Counts down to 0 in steps of x: from 10**6, a few thousand steps; with x = 0,
    # never (the budget's case).
    def cond(c):
        return c[0] > 0

    def body(c):
        return c[0] - x_ref[0], c[1] + 1

    o_ref[0] = jax.lax.while_loop(cond, body, (jnp.int32(10**6), jnp.int32(0)))[1]


def countdown(x):
    return pl.pallas_call(
        countdown_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
        grid=(x.shape[0],),
        in_specs=[pl.BlockSpec((1,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
    )(x)


def line_of(fn, needle: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, text in enumerate(lines) if needle in text)


def test_loops_that_end_give_the_same_results_as_plain_python():
    # Some programs loop past the first chunk (1,000 iterations), all different.
    starts = np.array([27, 97, 871, 6171, 1, 2, 3, 77031], np.int32)
    steps = np.asarray(pallaslab.emulate(collatz)(jnp.asarray(starts)))
    assert steps.tolist() == [numpy_collatz(int(n)) for n in starts]
    strides = np.array([60, 333, 999, 10**6], np.int32)  # up to 16,667 steps
    counts = np.asarray(pallaslab.emulate(countdown)(jnp.asarray(strides)))
    assert counts.tolist() == [-(-(10**6) // int(s)) for s in strides]
    assert loop_budget.take_stops() == []


def test_a_loop_past_the_budget_is_stopped_and_named_at_its_line():
    starts = jnp.asarray([27, 0, 5, 9], jnp.int32)  # program 1: 0 never reaches 1
    with pytest.raises(run_budget.RunStoppedError) as raised:
        pallaslab.emulate(collatz)(starts)
    error = raised.value
    assert error.location.line == line_of(collatz_kernel, "COLLATZ LOOP")
    assert error.stops[0].iterations == BUDGET
    assert f"ran {BUDGET:,} iterations" in str(error)


def test_pallas_interpreter_loops_are_bounded_too():
    starts = jnp.asarray([0], jnp.int32)
    with pytest.raises(run_budget.RunStoppedError) as raised:
        pallaslab.emulate(collatz, interpret=True)(starts)
    assert raised.value.location.line == line_of(collatz_kernel, "COLLATZ LOOP")
    assert raised.value.stops[0].iterations == BUDGET
    # and without the budget's need, the interpreter's answers are the plain ones
    finite = np.asarray(
        pallaslab.emulate(collatz, interpret=True)(jnp.asarray([27, 97], jnp.int32))
    )
    assert finite.tolist() == [numpy_collatz(27), numpy_collatz(97)]


@pytest.mark.gpu
def test_interpreted_kernels_on_a_gpu_are_bounded_too():
    """`--interpret` on a GPU: Pallas' interpreter runs there, its loops bounded alike."""
    starts = jax.device_put(jnp.asarray([27, 0], jnp.int32), jax.devices("gpu")[0])
    with pytest.raises(run_budget.RunStoppedError) as raised:
        pallaslab.emulate(collatz, interpret=True)(starts)
    assert raised.value.location.line == line_of(collatz_kernel, "COLLATZ LOOP")


def test_check_reports_the_stopped_loop():
    checked = pallaslab.check(countdown, lambda x: x, jnp.asarray([5, 0], jnp.int32))
    assert not checked.ok
    line = line_of(countdown_kernel, "o_ref[0] = jax.lax")
    assert f"the loop at test_run_budget.py:{line} ran {BUDGET:,} iterations" in (
        checked.points[0].error
    )


def test_the_wall_clock_limit_stops_a_run():
    pallaslab.set_run_budget(loop_iterations=2_000_000_000, seconds=1)
    started = time.monotonic()
    with pytest.raises(run_budget.RunStoppedError) as raised:
        pallaslab.emulate(countdown)(jnp.asarray([0], jnp.int32))
    assert time.monotonic() - started < 30
    assert raised.value.stops[0].reason == "seconds"
    assert "longer than its budget of 1 s" in str(raised.value)


def test_the_budget_is_checked():
    with pytest.raises(ValueError, match="at least 1,000"):
        pallaslab.set_run_budget(loop_iterations=10)
    with pytest.raises(ValueError, match="positive"):
        pallaslab.set_run_budget(seconds=0)
    budget = pallaslab.set_run_budget(loop_iterations=50_000)
    assert budget.loop_iterations == 50_000
    assert "50,000 iterations per loop" in budget.describe()


SPIN_CELL = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def spin_kernel(x_ref, o_ref):
    total = jax.lax.while_loop(
        lambda c: c[0] < 10, lambda c: (c[0], c[1] + 1.0), (jnp.int32(0), jnp.float32(0))
    )[1]
    o_ref[...] = x_ref[...] + total

spin = pl.pallas_call(spin_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
x = jnp.ones((8, 128))
"""


@pytest.mark.parametrize("flags", ["", "--interpret"])
def test_the_magic_names_the_loop_and_keeps_the_cell(ip, flags):
    from pallaslab._src.magic import KernelCellError

    result = ip.run_cell(f"%%kernel spin(x) {flags}\n{SPIN_CELL}")
    error = result.error_in_exec
    assert isinstance(error, KernelCellError), repr(error)
    loop_line = 1 + next(
        k for k, text in enumerate(SPIN_CELL.splitlines(), 1) if "jax.lax.while_loop" in text
    )
    assert error.diagnosis.kind == "run-budget"
    assert error.diagnosis.location.line == loop_line
    assert f"the loop at line {loop_line} ran {BUDGET:,} iterations" in str(error)
    assert "spin_kernel" in ip.user_ns  # the cell's names stay
    # and the next cell runs
    after = ip.run_cell(
        "%%kernel spin2(x)\nspin2 = pl.pallas_call(lambda x_ref, o_ref: "
        "o_ref.__setitem__(..., x_ref[...] * 2), "
        "out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))\n"
    )
    assert after.success, after.error_in_exec
    assert float(ip.user_ns["_kernel"].result.values[0][0, 0]) == 2.0


# --- A real kernel process, interrupted ------------------------------------------------


def _execute(client, code: str, timeout: float = 120) -> dict:
    msg_id = client.execute(code)
    return _reply(client, msg_id, timeout)


def _reply(client, msg_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        reply = client.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]


def _wait_for_output(client, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if message["msg_type"] == "stream" and text in message["content"].get("text", ""):
            return
    raise AssertionError(f"the kernel never printed {text!r}")


@pytest.mark.parametrize("flags", ["", "--interpret"])
def test_an_interrupted_kernel_cell_leaves_the_session_usable(flags):
    jupyter_client = pytest.importorskip("jupyter_client.manager")
    manager, client = jupyter_client.start_new_kernel(
        kernel_name="python3", env={**os.environ, "JAX_PLATFORMS": "cpu"}
    )
    try:
        setup = _execute(
            client,
            "%load_ext pallaslab\nimport pallaslab\n"
            "pallaslab.set_run_budget(loop_iterations=2_000_000_000, seconds=None)",
        )
        assert setup["status"] == "ok"
        # The cell prints once its own code has run: the run (the loop) is next.
        cell = f"%%kernel spin(x) {flags}\n{SPIN_CELL}print('body ran', flush=True)\n"
        msg_id = client.execute(cell)
        _wait_for_output(client, "body ran", timeout=120)
        time.sleep(3)  # well into the loop
        interrupted_at = time.monotonic()
        manager.interrupt_kernel()
        reply = _reply(client, msg_id, timeout=60)
        assert reply["status"] == "error"
        assert reply["ename"] == "KernelInterrupted"
        assert "interrupted; results so far kept" in reply["evalue"]
        assert len(reply["traceback"]) == 1  # one line, not pallaslab's frames
        following = _execute(
            client,
            "%%kernel double(x)\ndouble = pl.pallas_call(lambda x_ref, o_ref: "
            "o_ref.__setitem__(..., x_ref[...] * 2), "
            "out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))\n"
            "print(float(_kernel.result.values[0][0, 0]) if False else '')\n",
            timeout=60,
        )
        assert following["status"] == "ok", following
        assert time.monotonic() - interrupted_at < 60
        value = _execute(client, "assert float(_kernel.result.values[0][0, 0]) == 2.0")
        assert value["status"] == "ok", value
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
