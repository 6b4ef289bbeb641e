"""`pallaslab lower` on bad input: one clear line, an exit status, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pallaslab._src import cli
from tests import test_cli

# The kernels of test_cli.py, and a function that calls `add` wrongly (line 17).
KERNELS = test_cli.KERNELS + "\ndef one_input(x):\n    return add(x)\n"


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert len(err.splitlines()) <= 15
    return code, out, err


def test_lower_without_args_names_what_is_missing(kernels, capsys):
    code, out, err = run(capsys, "lower", f"{kernels}:add")
    assert code == 2 and out == ""
    assert "takes x, y: describe them with --args" in err
    code, _, err = run(capsys, "lower", f"{kernels}:add", "--args", "f32[1024]")
    assert code == 2 and "takes y: describe it with --args" in err


def test_lower_on_a_directory(tmp_path, capsys):
    code, _, err = run(capsys, "lower", f"{tmp_path}:add")
    assert code == 2 and "is a directory" in err


def test_lower_on_a_file_with_a_syntax_error(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("import jax\n\ndef f(x:\n    return x\n")
    code, _, err = run(capsys, "lower", f"{path}:f", "--args", "f32[8]")
    # Python reports the unclosed parenthesis at line 3, where it opens.
    assert code == 1 and err.startswith(f"{path}:3: error:") and "SyntaxError" in err


def test_lower_on_a_file_that_raises(tmp_path, capsys):
    path = tmp_path / "raises.py"
    path.write_text("x = 1\nraise RuntimeError('configure me first')\n")
    code, _, err = run(capsys, "lower", f"{path}:f")
    assert code == 1 and err.startswith(f"{path}:2: error:") and "configure me first" in err


def test_a_function_that_fails_to_trace_names_its_line(kernels, capsys):
    code, _, err = run(capsys, "lower", f"{kernels}:one_input", "--args", "f32[1024]")
    # add(x) without y: a TypeError at the line of the call in one_input (line 17).
    assert code == 1 and err.startswith(f"{kernels}:17: error:") and "'y'" in err


def test_an_internal_error_is_one_message(kernels, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("x" * 100_000)

    monkeypatch.setattr(cli, "_lower", broken)
    code, _, err = run(capsys, "lower", f"{kernels}:add")
    assert code == 3 and err.startswith("pallaslab: internal error: KeyError")
    assert len(err) < 2000


def test_a_bad_file_as_a_program(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pallaslab._src.cli", "lower", f"{tmp_path}:f"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
