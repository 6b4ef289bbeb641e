"""`pl.debug_print` at scale: printed once per program, as Pallas' interpreter prints, clipped.

Kernels of our own that print their program id and a value, once and inside a loop.
Oracles: Pallas' own interpreter (`interpret=True`, no pallaslab) for the text, the
program count for the number of lines, and the lowered program's text for what the
emulator binds (no callback unrolled per program).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.base import kernel_output


def printing_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    pl.debug_print("program {} first {}", i, x_ref[0])

    def step(k, carry):
        pl.debug_print("program {} step {}", i, k)
        return carry + x_ref[k]

    o_ref[0] = jax.lax.fori_loop(0, 2, step, x_ref[0])


def printing(x, interpret=False):
    programs = x.shape[0] // 8
    return pl.pallas_call(
        printing_kernel,
        out_shape=jax.ShapeDtypeStruct((programs,), x.dtype),
        grid=(programs,),
        in_specs=[pl.BlockSpec((8,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
        interpret=interpret,
    )(x)


def printed(fn, *args) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax.block_until_ready(fn(*args))
        jax.effects_barrier()
    return out.getvalue().splitlines()


def interpreted_lines(x) -> list[str]:
    """What Pallas' own interpreter prints (no pallaslab in the way)."""
    with pallaslab._src.core.jax_adapter.auto_interpret(False):
        return printed(lambda a: printing(a, interpret=True), x)


def test_the_emulator_prints_what_the_interpreter_prints_once_per_program():
    x = jnp.arange(8 * 6, dtype=jnp.int32)
    emulated = printed(pallaslab.emulate(printing), x)
    expected = interpreted_lines(x)
    assert len(expected) == 6 * 3
    assert sorted(emulated) == sorted(expected)
    # Prints outside loops come in program order.
    firsts = [line for line in emulated if " first " in line]
    assert firsts == [line for line in expected if " first " in line]


def test_prints_of_batched_programs_are_not_unrolled_into_the_program():
    x = jax.ShapeDtypeStruct((8 * 2000,), jnp.int32)
    with pallaslab._src.core.emulator.scope(pallaslab._src.core.emulator.EMULATE):
        text = jax.jit(printing).lower(x).as_text()
    callbacks = len(
        re.findall(r"custom_call @xla_python_cpu_callback|xla_ffi_python_cpu_callback", text)
    )
    assert 0 < callbacks < 10  # one per print site, not one per program (2000)


def test_a_cell_shows_a_bounded_output_and_saves_all_of_it(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path))
    programs = 500
    body = (
        "import jax, jax.numpy as jnp\n"
        "from tests.test_kernel_output import printing\n"
        f"x = jnp.arange({8 * programs}, dtype=jnp.int32)\n"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = ip.run_cell(f"%%kernel printing(x)\n{body}")
    assert result.success, result.error_in_exec
    lines = out.getvalue().splitlines()
    kernel_lines = [line for line in lines if line.startswith("program ")]
    assert len(kernel_lines) == kernel_output.MAX_LINES
    notice = next(line for line in lines if "not shown" in line)
    total = 3 * programs
    assert f"{total - kernel_output.MAX_LINES:,} more lines" in notice
    saved = Path(notice.rsplit(" are in ", 1)[1])
    assert saved.parent == tmp_path / "output"
    expected = interpreted_lines(jnp.arange(8 * programs, dtype=jnp.int32))
    assert sorted(saved.read_text(encoding="utf-8").splitlines()) == sorted(expected)


def test_the_checks_after_a_run_print_nothing_again(ip):
    """The leak and race checks run the kernel again: its prints appear once."""
    body = (
        "import jax, jax.numpy as jnp\n"
        "from tests.test_kernel_output import printing\n"
        "x = jnp.arange(8 * 4, dtype=jnp.int32)\n"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = ip.run_cell(f"%%kernel printing(x)\n{body}")
    assert result.success, result.error_in_exec
    run = ip.user_ns["_kernel"].result
    assert run.mode == "emulated"
    assert not any("not checked" in n.lower() for n in run.notices)  # the checks did run
    kernel_lines = [line for line in out.getvalue().splitlines() if line.startswith("program ")]
    assert len(kernel_lines) == 4 * 3


def test_clipping_keeps_partial_lines_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path))
    target = io.StringIO()
    stream = kernel_output.ClippedStream(target, max_lines=2, max_chars=1000)
    for text in ["one\n", "tw", "o\n", "three\n", "four"]:
        stream.write(text)
    found = stream.finish()
    assert target.getvalue() == "one\ntwo\n"
    assert found.clipped_lines == 2
    assert found.path is not None
    assert found.path.read_text(encoding="utf-8") == "one\ntwo\nthree\nfour"


@pytest.mark.parametrize("flag", ["--bench", "--tune BLOCK=1,2"])
def test_no_run_with_bench_or_tune_is_refused(ip, flag):
    with pytest.raises(UsageError, match="--no-run traces only"):
        ip.run_cell_magic("kernel", f"f(x) --no-run {flag}", "f = abs; x = 1\nBLOCK = 1\n")
