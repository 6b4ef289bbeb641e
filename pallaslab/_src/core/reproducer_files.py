"""Where a reproducer's files go: checked before anything is written, never half written.

A reproducer writes a script (`bug.py`) and, with its inputs, `bug.npz` beside it.
Before any work: the two paths must differ, their folder must exist and be one the
user can write to, a relative path must stay inside the working directory, files
there are replaced only when asked (`overwrite=True`, `--force`), and the inputs
must fit on the disk. Then both files are written to temporary names beside their
places and moved there together: a failure (a full disk) leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pallaslab._src.base import words


class ReproducerPathError(ValueError):
    """A reproducer that cannot be written where it was asked to be (says why)."""


@dataclasses.dataclass(frozen=True)
class Destination:
    """Where a reproducer goes.

    Attributes:
        script: The script's path.
        inputs: The inputs' `.npz` beside it (None when inputs are not saved).
        replaced: The files already there that will be replaced.
    """

    script: Path
    inputs: Path | None
    replaced: tuple[Path, ...] = ()


def destination(path: str | Path, *, save_inputs: bool, overwrite: bool) -> Destination:
    """The checked paths of a reproducer asked to be written at `path`.

    Raises:
        ReproducerPathError: Naming the problem: a shared path, a missing or
            unwritable folder, a directory given as the script, a relative path
            leaving the working directory, a file there (without `overwrite`).
    """
    text = str(path)
    if not text.strip():
        raise ReproducerPathError("the reproducer's path is empty; name a script, as in bug.py")
    script = Path(text).expanduser()
    if not script.is_absolute():
        inside = Path.cwd().resolve()
        where = (inside / script).resolve()
        if not where.is_relative_to(inside):
            raise ReproducerPathError(
                f"{text} leaves the working directory ({inside}) for {where}; give the "
                "absolute path if that is where it should go"
            )
    if script.is_dir():
        raise ReproducerPathError(
            f"{text} is a directory; name the script to write in it, as in {script / 'bug.py'}"
        )
    if script.suffix != ".py":
        if script.suffix == ".npz" and save_inputs:
            raise ReproducerPathError(
                f"the script and its inputs would both be {script.name}; name the script "
                f"{script.with_suffix('.py').name} (the inputs go to {script.name})"
            )
        script = script.with_name(script.name + ".py") if not script.suffix else script
    inputs = script.with_suffix(".npz") if save_inputs else None
    if inputs is not None and inputs == script:
        raise ReproducerPathError(f"the script and its inputs would both be {script}")
    folder = script.parent
    if not folder.exists():
        raise ReproducerPathError(
            f"no folder {folder} to write {script.name} in; make it first (nothing was written)"
        )
    if not folder.is_dir():
        raise ReproducerPathError(f"{folder} is a file, not a folder to write {script.name} in")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReproducerPathError(f"cannot write in {folder} (no permission)")
    present = tuple(p for p in (script, inputs) if p is not None and p.exists())
    for existing in present:
        if existing.is_dir():
            raise ReproducerPathError(f"{existing} is a directory; choose another name")
    if present and not overwrite:
        names = words.and_list([str(p) for p in present])
        verb = "exists" if len(present) == 1 else "exist"
        raise ReproducerPathError(
            f"{names} already {verb}; nothing was written. Choose another name, or replace "
            "them with overwrite=True (--force on the command line and the magic line)"
        )
    return Destination(script, inputs, present)


def check_space(dest: Destination, inputs_bytes: int) -> None:
    """Raises when the inputs would not fit on the disk (with a margin)."""
    if dest.inputs is None:
        return
    free = shutil.disk_usage(dest.inputs.parent).free
    if inputs_bytes + (64 << 20) > free:
        raise ReproducerPathError(
            f"the inputs take {words.nbytes(inputs_bytes)} and the disk holding "
            f"{dest.inputs.parent} has {words.nbytes(free)} free; nothing was written "
            "(without save_inputs, the script makes seeded operands instead)"
        )


@contextlib.contextmanager
def _temporary(beside: Path, suffix: str) -> Iterator[Path]:
    handle, name = tempfile.mkstemp(prefix=f".{beside.stem}-", suffix=suffix, dir=beside.parent)
    os.close(handle)
    temporary = Path(name)
    mask = os.umask(0)
    os.umask(mask)
    temporary.chmod(0o666 & ~mask)  # as a file written in place would be
    try:
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def write_together(
    dest: Destination, script_text: str, save_inputs: Callable[[Path], None] | None
) -> None:
    """Writes the script (and the inputs, with `save_inputs(path)`) all or nothing."""
    with _temporary(dest.script, ".py") as script_tmp:
        script_tmp.write_text(script_text, encoding="utf-8")
        if dest.inputs is None or save_inputs is None:
            script_tmp.replace(dest.script)
            return
        with _temporary(dest.inputs, ".npz") as inputs_tmp:
            save_inputs(inputs_tmp)
            inputs_tmp.replace(dest.inputs)
            script_tmp.replace(dest.script)
