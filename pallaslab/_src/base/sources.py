"""Source text and human names for the files kernels come from.

Notebook cells are compiled under temporary file names (`/tmp/ipykernel_123/2371327097.py`,
`<ipython-input-6-a1b2c3>`); everything that shows a location names a cell as the
notebook does, "Cell [4] line 7", through `location` and `label` here. The magic
registers each cell it runs ("Cell [4]", with its text); any other cell is named by
the number IPython gave it, which the top-level package reads from the running shell
(`register_cell_numbers`: this layer imports no IPython). Other files are read with
`linecache`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import linecache
import re
import sys
import sysconfig
import tokenize
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

_cell_labels: dict[str, str] = {}
# Returns {cell file name: execution count} of the running shell ({} outside one).
_cell_numbers: Callable[[], Mapping[str, Any]] | None = None
# IPython's own names for cells: `<ipython-input-6-a1b2c3>` (terminal, testing shell)
# and ipykernel's `.../ipykernel_<pid>/<hash>.py`.
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_KERNEL_CELL_FILE = re.compile(r"ipykernel_\d+[/\\]-?\d+\.py$")


def register_cell(filename: str, label: str, text: str) -> None:
    """Records that `filename` holds a notebook cell's code, shown as `label`."""
    _cell_labels[filename] = label
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)


def register_cell_numbers(numbers: Callable[[], Mapping[str, Any]] | None) -> None:
    """Sets how the running shell's cells are numbered: `{file name: execution count}`."""
    global _cell_numbers  # noqa: PLW0603
    _cell_numbers = numbers


def cell_numbers() -> Mapping[str, Any]:
    """The running shell's cell numbers by file name ({} outside IPython)."""
    if _cell_numbers is None:
        return {}
    try:
        found = _cell_numbers()
    except Exception:  # a shell in an odd state names no cells, it breaks nothing
        return {}
    return found if isinstance(found, Mapping) else {}


def is_cell_file(filename: str) -> bool:
    """Whether `filename` is one IPython gives a cell's code, numbered or not."""
    return bool(_IPYTHON_INPUT.match(filename) or _KERNEL_CELL_FILE.search(filename))


def cell_label(filename: str, numbers: Mapping[str, Any] | None = None) -> str | None:
    """How the notebook names a cell ("Cell [4]"); None for other files.

    The magic's label for a cell it ran, else the number the shell ran the cell as
    (`numbers`, by default the running shell's), else the number in IPython's
    `<ipython-input-N-...>` name. A cell file no shell numbers any more (another
    session's) is "a notebook cell".
    """
    if found := _cell_labels.get(filename):
        return found
    number = (cell_numbers() if numbers is None else numbers).get(filename)
    if number is not None:
        return f"Cell [{number}]"
    if match := _IPYTHON_INPUT.match(filename):
        return f"Cell [{match.group(1)}]"
    return "a notebook cell" if is_cell_file(filename) else None


def label(filename: str) -> str:
    """A short human name: the cell's ("Cell [4]"), else the file's base name."""
    return cell_label(filename) or Path(filename).name or filename


def location(filename: str, line: int | None) -> str:
    """Where a line is, as messages and views show it.

    "Cell [4] line 7" in a notebook cell, `path/to/kernels.py:31` in a file (as
    compilers print it, for editors to follow), the file alone without a line.
    """
    found = cell_label(filename)
    if found is not None:
        return f"{found} line {line}" if line else found
    return f"{filename}:{line}" if line else filename


def lines(filename: str) -> list[str]:
    """The file's lines without line ends ([] when the source is unavailable)."""
    return [line.rstrip("\r\n") for line in linecache.getlines(filename)]


# pallaslab/ itself (this file is pallaslab/_src/base/sources.py).
_PACKAGE_DIR = str(Path(__file__).resolve().parents[2])


# Packages whose frames are never the user's, wherever they are installed from (a
# source checkout on PYTHONPATH, an editable install, Debian's dist-packages).
_LIBRARY_PACKAGES = ("jax", "jaxlib")


def is_library_file(filename: str) -> bool:
    """Whether the file belongs to pallaslab, an installed package or Python itself."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return (
        "site-packages" in filename
        or "dist-packages" in filename
        or filename.startswith(_PACKAGE_DIR)
        or any(filename.startswith(str(Path(p) / "lib")) for p in prefixes)
        or any(filename.startswith(d) for d in _library_dirs())
    )


# JAX's published kernels: code a kernel author wrote, shown as a kernel's source.
_PUBLISHED_KERNELS = ("experimental/pallas/ops/",)


def is_internal_file(filename: str) -> bool:
    """Whether the file is machinery rather than anyone's kernel code.

    pallaslab itself, JAX's and jaxlib's implementation (the wrappers `pallas_call`,
    `plgpu.kernel` and default BlockSpecs are made of) and Python's standard library.
    JAX's published kernels (`jax.experimental.pallas.ops`) and other packages' code
    are kernel source: their authors wrote them, and a view may show them as such.
    Records point at user source, at such kernel source, or nowhere, never here.
    """
    if not filename or filename.startswith("<"):
        return False
    path = filename.replace("\\", "/")
    if path.startswith(_PACKAGE_DIR.replace("\\", "/") + "/"):
        return True
    for package in _library_dirs():
        if path.startswith(package.replace("\\", "/")):
            inside = path[len(package.replace("\\", "/")) :]
            return not inside.startswith(_PUBLISHED_KERNELS)
    return _in_standard_library(path)


@functools.lru_cache(maxsize=1)
def _standard_library_dirs() -> tuple[str, ...]:
    found = {sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib")}
    return tuple(str(Path(d)).replace("\\", "/") + "/" for d in found if d)


def _in_standard_library(path: str) -> bool:
    return any(path.startswith(d) for d in _standard_library_dirs()) and not (
        "site-packages" in path or "dist-packages" in path
    )


def is_user_source(filename: str) -> bool:
    """Whether a file is the user's own (not a library's, not `<string>`)."""
    return bool(filename) and not filename.startswith("<") and not is_library_file(filename)


def message_name(
    filename: str, cell_numbers: Mapping[str, Any] | None = None, current: str | None = None
) -> str | None:
    """How messages name a source file's lines; None for a library's (left out).

    "Cell line" for the cell running (`current`), "Cell [5] line" for another
    notebook cell (registered here, or numbered in `cell_numbers`, by default the
    running shell's), "file.py line" for the user's own files.
    """
    if current is not None and filename == current:
        return "Cell line"
    if found := cell_label(filename, cell_numbers):
        return f"{found} line"
    return f"{Path(filename).name} line" if is_user_source(filename) else None


def _library_dirs() -> list[str]:
    found = []
    for name in _LIBRARY_PACKAGES:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            found.append(str(Path(file).parent) + "/")
    return found


@dataclasses.dataclass(frozen=True)
class Extent:
    """Lines `first`..`last` (1-based, inclusive) of a file."""

    first: int
    last: int


def function_extent(
    filename: str, def_line: int, text: Sequence[str] | None = None
) -> Extent | None:
    """The lines of the function (or lambda) defined at `def_line` in a file.

    This reads the file's Python structure only to find where a function ends, so
    the Source view can show it whole; kernels themselves are understood by tracing.

    Args:
        filename: The file.
        def_line: The line the function is defined at.
        text: The file's lines, when they are not to be read now (a snapshot).
    """
    best: Extent | None = None
    for start, def_at, end in _function_spans(python_text(filename, text)):
        if start <= def_line <= def_at and (best is None or end - start < best.last - best.first):
            best = Extent(start, end)
    return best


def parameter_names(filename: str, def_line: int) -> tuple[str, ...]:
    """The positional parameter names of the function defined at `def_line`.

    For labels only (the refs a wrapper passes on to a kernel function): like
    `function_extent`, this reads the file's structure, never the kernel's meaning.
    """
    for node in _nodes(python_text(filename)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        # Python's first line of a decorated function is its first decorator's.
        if def_line in (node.lineno, min([node.lineno, *(d.lineno for d in node.decorator_list)])):
            arguments = node.args
            return tuple(a.arg for a in [*arguments.posonlyargs, *arguments.args])
    return ()


def python_text(filename: str, text: Sequence[str] | None = None) -> str:
    """The file's text with IPython's magic and shell lines (`%%kernel`, `!pip`) blanked.

    Line numbers stay those of the cell, and the rest parses as Python. `text`: the
    file's lines, when they are not to be read now (a snapshot).
    """
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line
        for line in (lines(filename) if text is None else text)
    )


def _nodes(text: str) -> list[ast.AST]:
    """Every node of `text`'s syntax tree ([] when it is empty or not Python)."""
    if not text:
        return []
    try:
        return list(ast.walk(ast.parse(text)))
    except SyntaxError:
        return []


@functools.lru_cache(maxsize=32)
def _function_spans(text: str) -> tuple[tuple[int, int, int], ...]:
    """(first line incl. decorators, def line, last line) of every function in `text`."""
    spans = []
    for node in _nodes(text):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            if node.end_lineno is not None:
                spans.append((first, node.lineno, node.end_lineno))
    return tuple(spans)


@dataclasses.dataclass(frozen=True)
class CallSpan:
    """A call written in a file: its lines and the lines of its keyword arguments.

    Attributes:
        first: Line of the call's first character (1-based).
        last: Line of its closing parenthesis.
        keywords: (name, line) of every keyword argument inside it, nested calls'
            included (`out_specs=` inside a `pl.GridSpec(...)` argument).
    """

    first: int
    last: int
    keywords: tuple[tuple[str, int], ...]

    def keyword_line(self, name: str) -> int | None:
        """The line of the first `name=` argument, if the call has one."""
        return next((line for key, line in self.keywords if key == name), None)


def calls_to(filename: str, name: str) -> tuple[CallSpan, ...]:
    """Every call in a file of a function named `name` (`pl.pallas_call(...)` too).

    Like `function_extent`, this reads the file's structure only to point messages
    at the right line (e.g. the `pallas_call` whose arguments JAX refused).
    """
    return tuple(s for callee, s in _call_spans(python_text(filename)) if callee == name)


@functools.lru_cache(maxsize=32)
def _call_spans(text: str) -> tuple[tuple[str, CallSpan], ...]:
    spans = []
    for node in _nodes(text):
        if not isinstance(node, ast.Call) or node.end_lineno is None:
            continue
        func = node.func
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        keywords = tuple(
            (kw.arg, kw.lineno)
            for inner in ast.walk(node)
            if isinstance(inner, ast.Call)
            for kw in inner.keywords
            if kw.arg is not None
        )
        spans.append((callee, CallSpan(node.lineno, node.end_lineno, keywords)))
    return tuple(spans)


def source_problem(path: Path) -> tuple[int, str]:
    """Why the file is no Python source Python could read, and the line ((0, "") if it is).

    A binary file (NUL bytes), or text not in its declared encoding (UTF-8 unless a
    `# -*- coding: ... -*-` line says otherwise): said with the line and byte.
    """
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        return 1, f"{path.name} is a binary file, not Python source"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if "invalid or missing encoding" not in str(error):  # an unknown coding line
            return 1, f"{path.name} declares an encoding Python cannot use ({error})"
        encoding = "utf-8"  # its first lines are not UTF-8: the check below says where
    try:
        data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return line, (
            f"{path.name} is not {encoding.upper()} text: byte {data[error.start]:#04x} on "
            f"line {line} cannot be read (save it as UTF-8, or declare its encoding on its "
            "first line: # -*- coding: latin-1 -*-)"
        )
    return 0, ""
