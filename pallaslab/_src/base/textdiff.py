"""Aligning two compiler texts line by line, blind to renumbering.

Two versions of a kernel lower to texts whose value names, labels, locations and
addresses shift with every inserted line: `%52 = tt.load %51` becomes `%53 = tt.load
%52`. Lines are compared after `normalize` replaces such names by placeholders, so
only real changes show. `align` runs difflib over the normalised lines and returns
the opcodes over the original lines. Pure Python (no JAX, no NumPy).
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Sequence
from typing import Literal

Op = Literal["equal", "insert", "delete", "replace"]

# MLIR / LLVM / PTX values and block arguments: %52, %arg3, %c0_i32_11, %cst_2, %r12,
# %rd5, %c-1_i32. Names that are letters only (%tid, %ctaid) are kept.
_PERCENT_NAME = re.compile(r"%([A-Za-z0-9_$.\-]+)")
# MLIR attribute and location aliases (#loc12, #blocked1, #map3), LLVM attribute groups
# (#2) and metadata (!12, !dbg !12 is hidden earlier, but not always).
_HASH_ALIAS = re.compile(r"#([A-Za-z_][A-Za-z_.]*?)\d+\b")
_HASH_NUMBER = re.compile(r"(?<![\w])#\d+\b")
_METADATA = re.compile(r"(?<![\w])!\d+\b")
# MLIR locations left in a text: loc(#loc3), loc("file.py":12:4), loc(unknown).
_LOCATION = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_BLOCK_LABEL = re.compile(r"\^bb\d+")
# PTX / SASS labels and addresses.
_PTX_LABEL = re.compile(r"\$L__\w+")
_SASS_ADDRESS = re.compile(r"/\*[0-9a-fA-F]{4,}\*/")
_SASS_REGISTER = re.compile(r"\b(U?R|U?P)\d+\b")
# Memory addresses (object reprs, pointers); short hex numbers are immediates, kept.
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{8,}\b")
# LLVM labels at the start of a block: "12:" and "; preds = %11, %9".
_LLVM_LABEL = re.compile(r"^(\d+):")
_SPACES = re.compile(r"\s+")
# A jaxpr binder: "ab:f32[8]", "c:Ref<...>", "_:i32[]".
_JAXPR_BINDER = re.compile(r"(?<![\w.])([a-z]+):(?=[A-Za-z])")
# A lower-case word that is not part of a longer name, a parameter or a call.
_JAXPR_WORD = re.compile(r"(?<![\w.])([a-z]+)(?![\w=(])")
# The pretty-printer's column of "#" left where a location was dropped.
_JAXPR_TRAILER = re.compile(r"\s+#\s*$")

JAXPR_LANGUAGES = frozenset({"jaxpr"})


def _value_name(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.isdigit():
        return "%"
    name = re.sub(r"_\d+$", "", name)  # MLIR's uniquing suffix: %c0_i32_11 -> %c0_i32
    return "%" + re.sub(r"^([A-Za-z]+)\d+$", r"\1", name)  # %arg3 -> %arg, %rd5 -> %rd


def jaxpr_names(lines: Sequence[str]) -> frozenset[str]:
    """The variable names a jaxpr binds (its inputs, equation outputs, loop bodies)."""
    found: set[str] = set()
    for line in lines:
        found.update(_JAXPR_BINDER.findall(line))
    return frozenset(found)


def normalize(line: str, language: str = "", names: frozenset[str] = frozenset()) -> str:
    """A line with value names, labels, locations and addresses made anonymous.

    Args:
        line: One line of IR text.
        language: "jaxpr", "mlir", "llvm", "ptx", "sass", "hlo" ... ("" for any).
        names: For jaxprs, the bound variable names (`jaxpr_names` of the text):
            each becomes "_", since jaxprs name variables a, b, ..., ba, bb in order.
    """
    text = _LOCATION.sub("", line)
    if language in JAXPR_LANGUAGES:
        text = _JAXPR_TRAILER.sub("", text)
        if names:
            text = _JAXPR_WORD.sub(lambda m: "_" if m.group(1) in names else m.group(1), text)
    else:
        text = _PERCENT_NAME.sub(_value_name, text)
        text = _HASH_ALIAS.sub(lambda m: "#" + m.group(1), text)
        text = _HASH_NUMBER.sub("#", text)
        text = _METADATA.sub("!", text)
        text = _BLOCK_LABEL.sub("^bb", text)
        text = _PTX_LABEL.sub("$L", text)
        text = _LLVM_LABEL.sub(":", text)
        if language == "sass":
            text = _SASS_ADDRESS.sub("", text)
            text = _SASS_REGISTER.sub(lambda m: m.group(1), text)
    text = _ADDRESS.sub("0x", text)
    return _SPACES.sub(" ", text).strip()


def normalized_lines(lines: Sequence[str], language: str = "") -> list[str]:
    """`normalize` applied to every line of one text."""
    names = jaxpr_names(lines) if language in JAXPR_LANGUAGES else frozenset()
    return [normalize(line, language, names) for line in lines]


def align(
    a: Sequence[str], b: Sequence[str], language: str = "", *, autojunk: bool = False
) -> list[tuple[Op, int, int, int, int]]:
    """The opcodes `(op, a_start, a_end, b_start, b_end)` of difflib, on normalised lines.

    Indices are 0-based and end-exclusive, over the original line lists. With
    `autojunk`, lines that make up over 1% of a long text are not used to anchor
    matches (difflib's heuristic: fast on huge texts, rougher alignment). A jaxpr
    is aligned equation by equation first (an equation with its parameters and
    nested jaxprs is one unit, so a line of one `scan`'s body never pairs with a
    line of another's), then line by line inside the equations that differ.
    """
    norm_a, norm_b = normalized_lines(a, language), normalized_lines(b, language)
    if language not in JAXPR_LANGUAGES:
        return _opcodes(norm_a, norm_b, 0, 0, autojunk)
    units_a, units_b = equation_units(a), equation_units(b)
    keys_a = ["\n".join(norm_a[i:j]) for i, j in units_a]
    keys_b = ["\n".join(norm_b[i:j]) for i, j in units_b]
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=autojunk)
    found: list[tuple[Op, int, int, int, int]] = []
    for op, u1, u2, v1, v2 in matcher.get_opcodes():
        i1 = units_a[u1][0] if u1 < len(units_a) else len(a)
        i2 = units_a[u2 - 1][1] if u2 > u1 else i1
        j1 = units_b[v1][0] if v1 < len(units_b) else len(b)
        j2 = units_b[v2 - 1][1] if v2 > v1 else j1
        if op == "replace":  # the lines of the equations that differ, aligned
            found += _opcodes(norm_a[i1:i2], norm_b[j1:j2], i1, j1, autojunk)
        else:
            found.append((op, i1, i2, j1, j2))
    return found


def _opcodes(
    a: Sequence[str], b: Sequence[str], a_offset: int, b_offset: int, autojunk: bool
) -> list[tuple[Op, int, int, int, int]]:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
    return [
        (op, i1 + a_offset, i2 + a_offset, j1 + b_offset, j2 + b_offset)
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def equation_units(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) line spans of a jaxpr's equations, each with its continuation lines.

    The equations follow the line that ends in `let`, all at one depth; an
    equation's parameters and nested jaxprs are indented deeper, and its closing
    bracket (`] a b`) starts at the same depth with a bracket. Every other line
    (the header, the `in (...)` line) is a unit of its own.
    """
    units: list[tuple[int, int]] = []
    depth_of_equations: int | None = None
    for k, line in enumerate(lines):
        stripped = line.lstrip()
        depth = len(line) - len(stripped)
        if (
            units
            and depth_of_equations is not None
            and stripped
            and (
                depth > depth_of_equations or (depth == depth_of_equations and stripped[0] in ")]}")
            )
        ):
            units[-1] = (units[-1][0], k + 1)
            continue
        units.append((k, k + 1))
        if depth_of_equations is None and line.rstrip().endswith("let") and k + 1 < len(lines):
            following = lines[k + 1]
            depth_of_equations = len(following) - len(following.lstrip())
        elif depth_of_equations is not None and depth < depth_of_equations:
            depth_of_equations = None  # the `in (...)` line: the equations are over
    return units


def constants(text: str) -> dict[str, object]:
    """Top-level `NAME = literal` assignments of Python source (the knobs of a cell).

    Returns:
        Name to value, for values `ast.literal_eval` reads (numbers, strings,
        tuples ...); empty when the text does not parse.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    found: dict[str, object] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = literal
            elif isinstance(target, ast.Tuple) and isinstance(literal, tuple):
                for element, item in zip(target.elts, literal, strict=False):
                    if isinstance(element, ast.Name):
                        found[element.id] = item
    return found


def changed_constants(a_text: str, b_text: str) -> list[tuple[str, object, object]]:
    """The `NAME = literal` assignments whose value differs between two sources.

    Returns:
        (name, value in a, value in b), in b's order; names only one side assigns
        are left out (they are new code, not a changed knob).
    """
    before, after = constants(a_text), constants(b_text)
    return [
        (name, before[name], value)
        for name, value in after.items()
        if name in before and before[name] != value
    ]
