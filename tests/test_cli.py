"""The `pallaslab` command line: lowered text for scripts, diffs and CI."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from pallaslab._src import cli

KERNELS = textwrap.dedent(
    """\
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    def add(x, y, block=128):
        return pl.pallas_call(
            add_kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // block,),
            in_specs=[pl.BlockSpec((block,), lambda i: (i,))] * 2,
            out_specs=pl.BlockSpec((block,), lambda i: (i,)),
        )(x, y)
    """
)
ADD_LINE = 5


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_argument_specs():
    args, kwargs = cli.parse_args_spec("bf16[8,128], f32[], block=(8, 128), name='x,y'")
    assert [(a.shape, str(a.dtype)) for a in args] == [((8, 128), "bfloat16"), ((), "float32")]
    assert kwargs == {"block": (8, 128), "name": "x,y"}
    with pytest.raises(cli.CliError, match="unknown dtype 'f12'"):
        cli.parse_args_spec("f12[8]")
    with pytest.raises(cli.CliError, match="after a keyword"):
        cli.parse_args_spec("block=8, f32[8]")


def test_lower_prints_the_text_with_its_provenance(kernels, capsys):
    code, out, _ = _main(
        capsys,
        "lower",
        f"{kernels}:add",
        "--target",
        "mosaic-tpu:v5e",
        "--args",
        "f32[1024],f32[1024]",
    )
    assert code == 0
    first, *rest = out.splitlines()
    assert first.startswith("// Mosaic TPU module of kernel add_kernel") and "jax " in first
    assert any("arith.addf" in line for line in rest)
    assert "#loc" not in out


def test_map_prefixes_source_lines(kernels, capsys):
    code, out, _ = _main(
        capsys,
        "lower",
        f"{kernels}:add",
        "-t",
        "triton",
        "-a",
        "f32[512],f32[512],block=256",
        "--map",
        "--no-header",
    )
    assert code == 0
    (add,) = [line for line in out.splitlines() if "arith.addf" in line]
    assert add.lstrip().startswith(f"kernels.py:{ADD_LINE} |")
    assert "tensor<256xf32>" in add


def test_a_target_that_cannot_take_the_kernel_exits_1_naming_the_line(kernels, capsys):
    code, out, err = _main(
        capsys,
        "lower",
        f"{kernels}:add",
        "-t",
        "tpu-compile:v5e",
        "-a",
        "f32[1000],f32[1000],block=100",
    )
    assert code == 1 and out == ""
    assert err.startswith(f"{kernels}:12: error:") and "tiling rule" in err


def test_usage_errors_exit_2(kernels, capsys):
    code, _, err = _main(capsys, "lower", f"{kernels}:add", "-t", "ptx:sm_9O")
    assert code == 2 and "Did you mean ptx:sm_90" in err
    code, _, err = _main(capsys, "lower", f"{kernels}:nope", "-a", "f32[8],f32[8]")
    assert code == 2 and "defines no 'nope'" in err
    code, _, err = _main(capsys, "lower", "missing.py:f")
    assert code == 2 and "no such file" in err


def test_json_and_resources(kernels, capsys):
    code, out, _ = _main(
        capsys,
        "lower",
        f"{kernels}:add",
        "-t",
        "mosaic-tpu:v5e",
        "-a",
        "f32[1024],f32[1024]",
        "--json",
    )
    record = json.loads(out)
    assert code == 0 and record["target"] == "mosaic-tpu:v5e" and record["error"] is None
    assert record["source_map"] and "arith.addf" in record["text"]
    code, out, _ = _main(
        capsys,
        "lower",
        f"{kernels}:add",
        "-t",
        "mosaic-tpu:v5e",
        "-a",
        "f32[1024],f32[1024]",
        "--resources",
    )
    assert "VMEM of blocks and scratch" in out and "x_ref" in out


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_the_issue_example_ptx(kernels, capsys):
    code, out, _ = _main(
        capsys, "lower", f"{kernels}:add", "--target", "ptx:sm_90", "--args", "f32[1024],f32[1024]"
    )
    assert code == 0 and ".target sm_90a" in out and "add.f32" in out
    assert "may differ in detail" in out.splitlines()[0]


def test_targets_command_runs_as_a_program():
    done = subprocess.run(
        [sys.executable, "-m", "pallaslab._src.cli", "targets"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert "ptx:sm_90" in names and "tpu-compile:v5e" in names
