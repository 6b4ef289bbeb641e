"""Reproducers: scripts that rebuild a kernel call and run with jax and numpy only.

Every script is run in a fresh Python process in which pallaslab (and this repository's
`tests` package) cannot be imported; its printed checksums are compared with the
inspection's own run in this process (the emulator), an independent path.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src import cli
from pallaslab._src.core import jax_adapter, running, seeded
from pallaslab._src.core.program import program_of
from pallaslab._src.core.reproducer import checksum
from tests import corpus

# Runs scripts as `python script.py` would, in one fresh process where pallaslab (and
# this repository's tests) cannot be imported; prints {script: [exit status, stdout,
# stderr]} as JSON.
_BLOCKED_RUN = textwrap.dedent(
    """
    import contextlib, io, json, os, runpy, sys, traceback

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pallaslab", "tests"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)")
            return None

    sys.meta_path.insert(0, Blocked())
    results = {}
    for script in sys.argv[1:]:
        out, err = io.StringIO(), io.StringIO()
        status = 0
        os.chdir(os.path.dirname(script))
        sys.argv = [script]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exit:
                status = exit.code if isinstance(exit.code, int) else 1
            except BaseException:
                traceback.print_exc()
                status = 1
        results[script] = [status, out.getvalue(), err.getvalue()]
    print(json.dumps(results))
    """
)


@dataclasses.dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def run_scripts(paths: list[Path]) -> dict[Path, Run]:
    """Runs reproducers in one fresh process where pallaslab cannot be imported."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _BLOCKED_RUN, *map(str, paths)],
        capture_output=True,
        text=True,
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    return {Path(k): Run(*v) for k, v in results.items()}


def run_script(path: Path) -> Run:
    return run_scripts([path])[path]


def printed_checksums(stdout: str) -> list[str]:
    return re.findall(r"^output \d+: .*? sha256=([0-9a-f]{16})", stdout, re.MULTILINE)


# Every pallas_call kernel of the corpus: (case, kernel index). Mesh kernels
# (`pl.kernel`) are refused, and say so (below).
MESH_KERNELS = (corpus.tpu_mesh_kernel,)
CASES = [
    (build, k)
    for build in corpus.ALL
    if build not in MESH_KERNELS
    for k in range(2 if build in (corpus.two_kernels, corpus.grad_custom_vjp) else 1)
]


def test_pallaslab_is_really_blocked(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("import pallaslab\n")
    result = run_script(script)
    assert result.returncode != 0 and "No module named 'pallaslab' (blocked)" in result.stderr


@pytest.fixture(scope="module")
def corpus_runs(tmp_path_factory):
    """Every corpus kernel's reproducer (inputs saved), run in one pallaslab-free process."""
    written = {}
    for build, kernel in CASES:
        case = build()
        inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
        folder = tmp_path_factory.mktemp(f"{build.__name__}-{kernel}")
        written[build, kernel] = (
            inspection,
            inspection.reproducer(folder / "bug.py", save_inputs=True, kernel=kernel),
        )
    runs = run_scripts([w.script for _, w in written.values()])
    return {key: (inspection, w, runs[w.script]) for key, (inspection, w) in written.items()}


@pytest.mark.parametrize(("build", "kernel"), CASES, ids=[f"{b.__name__}-{k}" for b, k in CASES])
def test_the_corpus_reproduces_with_saved_inputs(build, kernel, corpus_runs):
    inspection, written, run = corpus_runs[build, kernel]
    assert written.problems == () and written.inputs is not None and written.inputs.exists()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "reproduced pallaslab's result" in run.stdout
    assert "bit for bit" in run.stdout
    got = printed_checksums(run.stdout)
    # The kernel alone in Pallas' own interpreter, here, on the operands the program
    # gives it.
    program = program_of(inspection)
    site = program.sites[kernel]
    operands = jax_adapter.kernel_inputs(site, program, seeded.example_arrays(program.example_args))
    with running.kernel_scope(interpret=True):
        alone = jax.jit(jax_adapter.site_function(site))(*operands)
    assert got == [checksum(v) for v in jax.tree_util.tree_leaves(alone)]
    # Where the kernel writes a program output as is, that is the inspection's run's
    # output (by the emulator).
    result = inspection.run(check=False)
    writers = jax_adapter.output_writers(program.closed_jaxpr, program.sites)
    for value, writer in zip(result.values, writers, strict=True):
        if writer is not None and writer[0] == kernel:
            assert got[writer[1]] == checksum(value)


def test_seeded_inputs_match_the_inspections_own(tmp_path):
    # Without saved inputs the script makes the operands as pallaslab makes the
    # inspection's example arrays: for a kernel on the program's arguments, the same.
    expected, scripts = {}, []
    for build in (corpus.blocked_add, corpus.seed_matmul, corpus.kacc_matmul):
        case = build()
        inspection = pallaslab.inspect(case.fn, *case.args)
        written = inspection.reproducer(tmp_path / f"{build.__name__}.py")
        assert written.inputs is None and not written.script.with_suffix(".npz").exists()
        values = inspection.run(check=False).values
        expected[written.script] = [checksum(v) for v in values]
        scripts.append(written.script)
    for script, run in run_scripts(scripts).items():
        assert run.returncode == 0, run.stdout + run.stderr
        assert printed_checksums(run.stdout) == expected[script]


# ---------------------------------------------------------------------------
# Closures and what the kernel reads.

SCALE = 3.0
OFFSETS = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)


def _shift(x, offsets):
    # Array values enter a kernel as Python numbers (a kernel cannot capture arrays).
    return x + float(offsets.sum()) * SCALE + float(offsets[1])


def make_closure_kernel(power: int, activation, table: tuple[int, ...]):
    """A kernel closing over an int, a function, a tuple, with global helpers."""
    bias = np.float32(0.125)

    def kernel(x_ref, o_ref, *, flip):
        x = x_ref[...]
        x = _shift(x, OFFSETS) + bias * table[power % len(table)]
        y = activation(x) ** power
        o_ref[...] = -y if flip else y

    return pl.pallas_call(
        functools.partial(kernel, flip=True),
        out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((16,), lambda i: (i,))],
        out_specs=pl.BlockSpec((16,), lambda i: (i,)),
        name="closure_kernel",
    )


def test_closures_helpers_and_constants_are_written(tmp_path):
    fn = make_closure_kernel(2, lambda v: jnp.tanh(v) + 1.0, (1, 2, 3))
    x = jnp.linspace(-2.0, 2.0, 64, dtype=jnp.float32)
    inspection = pallaslab.inspect(fn, x)
    expected = inspection.run(x, check=False).values[0]
    written = inspection.reproducer(tmp_path / "closure.py", save_inputs=True)
    assert written.problems == ()
    text = written.script.read_text()
    for piece in (
        "SCALE = 3.0",
        "OFFSETS = np.asarray([0.5, -1.0, 2.0, 0.25]",
        "def _shift(x, offsets):",
        "(1, 2, 3)",
        "lambda v: jnp.tanh(v) + 1.0",
        "functools.partial(kernel, flip=True)",
        "name='closure_kernel'",
    ):
        assert piece in text, piece
    run = run_script(written.script)
    assert run.returncode == 0, run.stdout + run.stderr
    assert printed_checksums(run.stdout) == [checksum(expected)]


@jax.jit
def _jitted_helper(v):
    return v * 2.0 + 1.0


@functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))
def decorated_kernel(x_ref, o_ref):
    o_ref[...] = _jitted_helper(x_ref[...])


def test_decorators_are_kept_on_helpers_and_dropped_from_the_kernel(tmp_path):
    # `@functools.partial(pl.pallas_call, ...)` makes the call; the script needs the
    # kernel under it. `@jax.jit` on a helper is part of the helper.
    inspection = pallaslab.inspect(decorated_kernel, jax.ShapeDtypeStruct((16,), jnp.float32))
    written = inspection.reproducer(tmp_path / "decorated.py")
    text = written.script.read_text()
    assert "@jax.jit\ndef _jitted_helper(v):" in text
    assert "\ndef decorated_kernel(x_ref, o_ref):" in text
    assert "@functools.partial(pl.pallas_call" not in text
    run = run_script(written.script)
    assert run.returncode == 0 and "reproduced pallaslab's result" in run.stdout, run.stderr


class Settings:
    """An object of the user's own class: a reproducer cannot write it."""

    def __init__(self) -> None:
        self.gain = 2.0


def test_what_cannot_be_written_is_said_and_fails_clearly(tmp_path):
    settings = Settings()

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * settings.gain

    fn = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))
    inspection = pallaslab.inspect(fn, jax.ShapeDtypeStruct((8,), jnp.float32))
    written = inspection.reproducer(tmp_path / "partial.py")
    assert len(written.problems) == 1 and "settings" in written.problems[0]
    text = written.script.read_text()
    assert "# NOT WRITTEN: settings" in text and "NOT WRITTEN: 'settings'" in text
    run = run_script(written.script)
    assert run.returncode != 0
    assert "settings (a tests.test_reproducer.Settings) could not be written" in run.stderr


def test_a_kernel_file_edited_since_it_ran_is_not_written_as_if_it_had_not(tmp_path):
    module = tmp_path / "edited_kernels.py"
    module.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax.experimental import pallas as pl\n\n"
        "def triple_kernel(x_ref, o_ref):\n"
        "    o_ref[...] = x_ref[...] * 3.0\n\n"
        "triple = pl.pallas_call(triple_kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))\n"
    )
    namespace = runpy.run_path(str(module))
    inspection = pallaslab.inspect(namespace["triple"], jax.ShapeDtypeStruct((8,), jnp.float32))
    module.write_text(module.read_text().replace("* 3.0", "* 4.0"))  # edited afterwards
    written = inspection.reproducer(tmp_path / "stale.py")
    assert len(written.problems) == 1
    assert "is not the code that ran (was the file edited" in written.problems[0]


# ---------------------------------------------------------------------------
# Targets: the script lowers and prints the IR, or reproduces the error.


def _halves_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _halves():
    # 48-element blocks: fine for TPU and the interpreter; Triton needs powers of two.
    return pl.pallas_call(
        _halves_kernel,
        out_shape=jax.ShapeDtypeStruct((96,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((48,), lambda i: (i,))],
        out_specs=pl.BlockSpec((48,), lambda i: (i,)),
    )


def _sort_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...], axis=-1)


@pytest.mark.parametrize(
    ("build", "shape", "target", "phrase"),
    [
        (_halves, (96,), "triton", "power of 2"),
        (
            lambda: pl.pallas_call(
                _sort_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32)
            ),
            (8, 128),
            "mosaic-tpu:v5e",
            "sort",
        ),
    ],
    ids=["triton-power-of-two", "tpu-sort"],
)
def test_a_lowering_failure_is_reproduced(build, shape, target, phrase, tmp_path):
    inspection = pallaslab.inspect(build(), jax.ShapeDtypeStruct(shape, jnp.float32))
    lowered = inspection.lower(target)
    if lowered.ok:
        pytest.skip(f"this JAX lowers it for {target}")
    assert phrase in lowered.error.message
    written = inspection.reproducer(tmp_path / "lowering.py", target=target)
    text = written.script.read_text()
    assert f"TARGET = {target!r}" in text
    assert f"pallaslab's lowering for {target} failed" in text  # what pallaslab saw
    run = run_script(written.script)
    assert run.returncode == 1
    assert phrase in run.stderr and "Traceback" in run.stderr


def test_a_lowering_that_works_prints_the_kernels_ir(tmp_path):
    inspection = pallaslab.inspect(corpus.blocked_add().fn, *corpus.blocked_add().args)
    written = inspection.reproducer(tmp_path / "ttir.py", target="triton")
    run = run_script(written.script)
    assert run.returncode == 0, run.stderr
    assert "tt.func" in run.stdout and "without error" in run.stdout


# ---------------------------------------------------------------------------
# The magic, the CLI, and what cannot be reproduced.


def test_the_magic_writes_a_reproducer_of_the_cells_call(ip, tmp_path):
    path = tmp_path / "cell_bug.py"
    cell = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
FACTOR = 4.0

def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * FACTOR

scale = pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                       grid=(2,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
                       out_specs=pl.BlockSpec((128,), lambda i: (i,)))
x = jnp.arange(256.0)
"""
    ip.run_cell_magic("kernel", f"scale(x) --reproducer {path}", cell)
    assert path.exists() and path.with_suffix(".npz").exists()
    text = path.read_text()
    assert "FACTOR = 4.0" in text and "def scale_kernel(x_ref, o_ref):" in text
    assert "Cell [" in text  # where the kernel came from
    run = run_script(path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert printed_checksums(run.stdout) == [checksum(np.arange(256.0, dtype=np.float32) * 4)]


def test_the_magic_needs_a_call_for_a_reproducer(ip):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="--reproducer rebuilds the call"):
        ip.run_cell_magic("kernel", "--reproducer bug.py", "x = 1")


def test_the_cli_writes_a_reproducer(tmp_path, capsys):
    source = tmp_path / "kernels.py"
    source.write_text(
        textwrap.dedent(
            """
            import jax, jax.numpy as jnp
            from jax.experimental import pallas as pl

            def double_kernel(x_ref, o_ref):
                o_ref[...] = x_ref[...] * 2.0

            double = pl.pallas_call(
                double_kernel, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32)
            )
            """
        )
    )
    out = tmp_path / "repro.py"
    status = cli.main(
        ["reproduce", f"{source}:double", "--args", "f32[128]", "-o", str(out), "--save-inputs"]
    )
    assert status == 0 and f"Wrote {out}" in capsys.readouterr().out
    run = run_script(out)
    assert run.returncode == 0 and "reproduced pallaslab's result" in run.stdout


def test_the_cli_says_why_no_reproducer(tmp_path, capsys):
    source = tmp_path / "nothing.py"
    source.write_text("def f(x):\n    return x + 1\n")
    status = cli.main(
        ["reproduce", f"{source}:f", "--args", "f32[4]", "-o", str(tmp_path / "r.py")]
    )
    assert status == 2
    assert "f runs no Pallas kernel" in capsys.readouterr().err


def test_without_a_traced_call_there_is_nothing_to_rebuild():
    from pallaslab._src.core.session import inspect_recorded

    case = corpus.blocked_add()
    with jax_adapter.recording_kernels() as sites:
        jax.make_jaxpr(case.fn)(*case.args)
    with pytest.raises(ValueError, match="a reproducer rebuilds a traced call"):
        inspect_recorded(sites).reproducer("never.py")


@pytest.mark.gpu
def test_on_a_gpu_the_script_runs_the_compiled_kernel(tmp_path):
    # Run with JAX_PLATFORMS=cuda: pallaslab's outputs come from the compiled Triton
    # kernel, and so do the script's.
    case = corpus.seed_matmul()
    inspection = pallaslab.inspect(case.fn, *case.args)
    written = inspection.reproducer(tmp_path / "gpu.py", save_inputs=True)
    done = subprocess.run(
        [sys.executable, str(written.script)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced pallaslab's result" in done.stdout


@pytest.mark.parametrize("build", MESH_KERNELS, ids=lambda b: b.__name__)
def test_mesh_kernels_are_refused_with_a_reason(build, tmp_path):
    case = build()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    with pytest.raises(ValueError, match="reproducers rebuild pallas_call kernels only"):
        inspection.reproducer(tmp_path / "bug.py")
    assert not (tmp_path / "bug.py").exists()
