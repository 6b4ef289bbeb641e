"""The command line on a user's mistakes: one clear message each, never "internal error".

Oracles: the exit status the README promises (2 for the command line, 1 for the
user's file), the message naming the problem and the nearest right name, and the
file system (nothing written).
"""

from __future__ import annotations

import pytest

from pallaslab._src import cli
from pallaslab._src.records.targets import reading_note
from tests import test_cli


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "kernels.py"
    path.write_text(test_cli.KERNELS)
    return path


def run(capsys, *argv):
    try:
        code = cli.main(list(argv))
    except SystemExit as exiting:  # argparse's own errors
        code = exiting.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error" not in err
    return code, out, err


ARGS = ("--args", "f32[1024],f32[1024]")


def test_a_misspelt_option_gets_the_nearest(kernels, capsys):
    code, _, err = run(capsys, "lower", f"{kernels}:add", *ARGS, "--taget", "ptx:sm_90")
    assert (
        code == 2 and "unrecognized arguments: --taget" in err and "did you mean --target?" in err
    )


def test_a_misspelt_command_gets_the_nearest(kernels, capsys):
    code, _, err = run(capsys, "lowr", f"{kernels}:add")
    assert code == 2 and "did you mean 'lower'?" in err


def test_an_unknown_function_gets_the_nearest(kernels, capsys):
    code, _, err = run(capsys, "lower", f"{kernels}:ad", *ARGS)
    assert code == 2 and "defines no 'ad'; did you mean 'add'?" in err


def test_a_guessed_target_name_is_said(kernels, capsys):
    code, _, err = run(capsys, "lower", f"{kernels}:add", *ARGS, "-t", "stablehlo:CUDA")
    assert code == 0 and "target 'stablehlo:CUDA' read as stablehlo:cuda" in err
    assert reading_note("ptx:sm90") == "target 'ptx:sm90' read as ptx:sm_90"
    assert reading_note("ptx:sm_90") == ""


def test_a_file_that_exits_says_so(tmp_path, capsys):
    path = tmp_path / "script.py"
    path.write_text("import sys\n\ndef f(x):\n    return x\n\nsys.exit(3)\n")
    code, _, err = run(capsys, "lower", f"{path}:f", "--args", "f32[8]")
    assert code == 1 and "called sys.exit(3)" in err and 'if __name__ == "__main__":' in err


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        (b"def f(x):\n    return x  # caf\xe9\n", 2, "is not UTF-8 text: byte 0xe9 on line 2"),
        (b"\x7fELF\x00\x00\x01binary", 1, "is a binary file, not Python source"),
    ],
)
def test_a_file_that_is_not_python_text_says_so(tmp_path, capsys, content, line, words):
    path = tmp_path / "odd.py"
    path.write_bytes(content)
    code, _, err = run(capsys, "lower", f"{path}:f", "--args", "f32[8]")
    assert code == 1 and err.startswith(f"{path}:{line}: error:") and words in err


@pytest.mark.parametrize(
    ("output", "words"),
    [
        (".", "is a directory; name the script to write in it"),
        ("nowhere/bug.py", "no folder nowhere to write bug.py in"),
        ("kernels.py/bug.py", "kernels.py is a file, not a folder"),
    ],
)
def test_a_reproducer_that_cannot_be_written(kernels, capsys, output, words):
    before = sorted(p.name for p in kernels.parent.iterdir())
    code, _, err = run(capsys, "reproduce", f"{kernels}:add", *ARGS, "-o", output)
    assert code == 2 and "no reproducer written:" in err and words in err
    assert sorted(p.name for p in kernels.parent.iterdir()) == before


def test_a_reproducer_never_replaces_a_file_without_force(kernels, capsys):
    (kernels.parent / "bug.py").write_text("# mine\n")
    code, _, err = run(capsys, "reproduce", f"{kernels}:add", *ARGS, "-o", "bug.py")
    assert code == 2 and "bug.py already exists" in err
    assert (kernels.parent / "bug.py").read_text() == "# mine\n"
    code, out, _ = run(capsys, "reproduce", f"{kernels}:add", *ARGS, "-o", "bug.py", "--force")
    assert code == 0 and "It replaced the earlier bug.py." in out


def test_a_misspelt_magic_option_gets_the_nearest(ip):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="did you mean --target"):
        ip.run_cell_magic("kernel", "f(x) --taget ptx:sm_90", "f = abs\nx = 1\n")
