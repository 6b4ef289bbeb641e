"""Nothing lost: where reproducers are written, what they never replace, names kept as text.

Kernels of our own. Oracles: the file system (what exists, with which bytes, before
and after), the script run in a fresh Python (it reproduces, and runs no code a
kernel's name smuggles in).
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import reproducer_files
from pallaslab._src.magic import KernelCellError


def twice_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def twice(x):
    spec = pl.BlockSpec((128,), lambda i: (i,))
    return pl.pallas_call(
        twice_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 128,),
        in_specs=[spec],
        out_specs=spec,
    )(x)


@pytest.fixture
def inspection():
    return pallaslab.inspect(twice, jnp.arange(256, dtype=jnp.float32))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_an_existing_file_is_never_replaced_without_overwrite(inspection, workdir):
    (workdir / "bug.npz").write_bytes(b"the user's own data")
    with pytest.raises(ValueError, match=r"bug\.npz already exists; nothing was written"):
        inspection.reproducer("bug.py", save_inputs=True)
    assert listing(workdir) == ["bug.npz"]
    assert (workdir / "bug.npz").read_bytes() == b"the user's own data"
    written = inspection.reproducer("bug.py", save_inputs=True, overwrite=True)
    assert "It replaced the earlier bug.npz." in str(written)
    assert listing(workdir) == ["bug.npz", "bug.py"]
    assert set(np.load(workdir / "bug.npz")) == {"input_0", "expected_0"}


def test_two_outputs_never_share_a_path(inspection, workdir):
    with pytest.raises(ValueError, match=r"would both be bug\.npz"):
        inspection.reproducer("bug.npz", save_inputs=True)
    assert listing(workdir) == []


def test_what_was_written_is_said_exactly(inspection, workdir):
    written = inspection.reproducer("bug.py", save_inputs=True)
    text = str(written)
    script_size = (workdir / "bug.py").stat().st_size
    assert text.startswith("Wrote bug.py (the script, ")
    assert f"{script_size / 1024:.3g} KiB" in text
    assert "and bug.npz (the operands and pallaslab's outputs, " in text
    assert written.script.name == "bug.py" and written.inputs.name == "bug.npz"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("missing/bug.py", "no folder missing to write bug.py in"),
        ("../outside.py", "leaves the working directory"),
        ("a_file/bug.py", "a_file is a file, not a folder"),
        ("a_folder", "a_folder is a directory; name the script to write in it"),
        ("", "the reproducer's path is empty"),
    ],
)
def test_paths_that_cannot_be_written_are_refused_before_anything(inspection, workdir, path, words):
    (workdir / "a_file").write_text("x")
    (workdir / "a_folder").mkdir()
    before = listing(workdir)
    with pytest.raises(reproducer_files.ReproducerPathError, match=words):
        inspection.reproducer(path, save_inputs=True)
    assert listing(workdir) == before
    assert not (workdir.parent / "outside.py").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_folder_without_permission_is_refused(inspection, workdir):
    locked = workdir / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(reproducer_files.ReproducerPathError, match="no permission"):
            inspection.reproducer("locked/bug.py")
    finally:
        locked.chmod(0o700)


def test_inputs_larger_than_the_disk_are_refused(inspection, workdir, monkeypatch):
    real = reproducer_files.shutil.disk_usage

    def tiny(path):
        return real(path)._replace(free=1000)

    monkeypatch.setattr(reproducer_files.shutil, "disk_usage", tiny)
    with pytest.raises(ValueError, match=r"the disk holding .* has 1000 B free"):
        inspection.reproducer("bug.py", save_inputs=True)
    assert listing(workdir) == []


def test_a_failure_while_writing_leaves_nothing_half_written(inspection, workdir, monkeypatch):
    def failing(path, **arrays):
        path.write_bytes(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", failing)
    with pytest.raises(OSError, match="No space left"):
        inspection.reproducer("bug.py", save_inputs=True)
    assert listing(workdir) == []  # no script, no .npz, no temporary file


NAMES = [
    'quote"d',
    'evil"""; import os; os.system("touch PWNED"); """',
    "line\nimport os; os.system('touch PWNED')",
    "not an identifier",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_kernels_name_is_text_in_the_script_never_code(workdir, name):
    def named_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    named_kernel.__name__ = name
    named_kernel.__qualname__ = name
    call = pl.pallas_call(
        named_kernel, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32), grid=(1,)
    )
    written = pallaslab.inspect(call, jnp.arange(128, dtype=jnp.float32)).reproducer("bug.py")
    done = subprocess.run(
        [sys.executable, str(written.script)],
        capture_output=True,
        text=True,
        cwd=workdir,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reproduced pallaslab's result" in done.stdout
    assert not (workdir / "PWNED").exists()


CELL = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from tests.test_reproducer_files import twice
x = jnp.arange(256, dtype=jnp.float32)
"""


def test_the_magic_replaces_nothing_without_force(ip, workdir):
    (workdir / "data.npz").write_bytes(b"keep me")
    result = ip.run_cell(f"%%kernel twice(x) --reproducer data.py\n{CELL}")
    assert isinstance(result.error_in_exec, KernelCellError)
    assert "data.npz already exists" in str(result.error_in_exec)
    assert (workdir / "data.npz").read_bytes() == b"keep me"
    assert not (workdir / "data.py").exists()
    forced = ip.run_cell(f"%%kernel twice(x) --reproducer data.py --force\n{CELL}")
    assert forced.success, forced.error_in_exec
    assert set(np.load(workdir / "data.npz")) == {"input_0", "expected_0"}
