"""Source lines of a GPU compile are the kernel's: never blank, never the `def`, never the wrapper.

Two causes, both fixed where the debug info is made: the `tt.func` location pallaslab
gives Triton (for the file name of the debug info) carried the kernel's `def` line,
which Triton and LLVM then gave to every op without a location of its own (program
ids, the prologue); and LLVM's NVPTX printer puts a `.loc` before each instruction of
an inline-assembly block (Triton's loads, stores and `wgmma`) with the block's line
plus the instruction's line within the block, naming the blank line after a
statement, the statements after it, or the wrapper defined below the kernel.

The oracle is the kernel's source read with `ast`: the lines of the kernel's body
and of the helpers it calls.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src.base import sources
from pallaslab._src.core.lowering import sourcemap, triton_build
from tests import corpus

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


def softplus(v):
    return jnp.log1p(jnp.exp(v))


def row_kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    w = w_ref[...]

    y = softplus(x) * w[None, :]
    o_ref[...] = y + jnp.sum(y, axis=1, keepdims=True)


@jax.jit
def rows(x, w):
    m, n = x.shape
    block = 32
    return pl.pallas_call(
        row_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // block,),
        in_specs=[pl.BlockSpec((block, n), lambda i: (i, 0)), pl.BlockSpec((n,), lambda i: (0,))],
        out_specs=pl.BlockSpec((block, n), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4),
    )(x, w)


def body_lines(file: str, *functions: str) -> set[int]:
    """The non-blank lines of the named functions' bodies (nested functions included)."""
    tree = ast.parse(Path(file).read_text(encoding="utf-8"))
    text = Path(file).read_text(encoding="utf-8").splitlines()
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            first = node.body[0].lineno
            found |= {n for n in range(first, node.end_lineno + 1) if text[n - 1].strip()}
    return found


def _mapped(inspection, target: str) -> set[tuple[str, int]]:
    lowered = inspection.lower(target)
    assert lowered.error is None, lowered.error
    assert lowered.source_map, f"{target} maps no line"
    return {(file, line) for _, file, line in lowered.source_map}


STAGES = ["ttgir:sm_90", "llir:sm_90", "ptx:sm_90", "sass:sm_90", "ptx:sm_80", "sass:sm_80"]


@needs_triton
@pytest.mark.parametrize("target", STAGES)
def test_my_kernels_lines_are_its_body_and_helper(target):
    inspection = _inspections()["rows"]
    allowed = body_lines(__file__, "row_kernel", "softplus")
    mapped = _mapped(inspection, target)
    assert {file for file, _ in mapped} == {__file__}
    outside = sorted(line for _, line in mapped if line not in allowed)
    assert outside == [], [(n, sources.lines(__file__)[n - 1]) for n in outside]


@needs_triton
@pytest.mark.parametrize("target", STAGES)
def test_the_seed_matmuls_lines_are_its_body(target):
    inspection = _inspections()["seed"]
    file = inspection.kernels[0].source.file
    allowed = body_lines(file, "_matmul_kernel")
    mapped = _mapped(inspection, target)
    assert {f for f, _ in mapped} == {file}
    outside = sorted(line for _, line in mapped if line not in allowed)
    assert outside == [], [(n, sources.lines(file)[n - 1]) for n in outside]
    # The loads, the dot and the store are all there.
    for needle in ("pltriton.load(a_ref", "pltriton.load(b_ref", "pltriton.dot", "pltriton.store"):
        line = next(n for n, t in enumerate(sources.lines(file), 1) if needle in t)
        assert (file, line) in mapped, (target, needle)


_CACHE: dict[str, object] = {}


def _inspections() -> dict[str, object]:
    """Each kernel inspected once for the module: its lowerings are cached with it."""
    if not _CACHE:
        spec = jax.ShapeDtypeStruct
        _CACHE["rows"] = pallaslab.inspect(
            rows, spec((128, 64), jnp.float32), spec((64,), jnp.float32)
        )
        case = corpus.seed_matmul(dtype=jnp.bfloat16)
        _CACHE["seed"] = pallaslab.inspect(case.fn, *case.args)
    return _CACHE


# ---------------------------------------------------------------------------
# The PTX reader and the function location, without a compiler.

PTX = """\
.version 8.7
.target sm_90a
.visible .entry k(
)
{
\t.loc\t1 0 0
$L__func_begin0:
\tld.param.b64 \t%rd2, [k_param_0];
\t.loc\t1 20 8
\tmov.u32 \t%r1, %tid.x;
\t// begin inline asm
\t.loc\t1 20 8
\tmov.u32 %r17, 0x0;
\t.loc\t1 21 8
\tmov.u32 %r18, 0x0;
\t.loc\t1 22 8
\tld.global.v2.b32 { %r17, %r18 }, [ %rd3 + 0 ];

\t// end inline asm
\t.loc\t1 30 25
\tmov.b32 \t%r79, %r76;
\t// begin inline asm
\t// wait for regs: %r44,%r45
\t.loc\t1 31 25
\twgmma.wait_group.sync.aligned 0;

\t// end inline asm
\tret;
}
\t.file\t1 "/src/k.py"
"""


def test_inline_asm_blocks_name_their_own_line():
    text, source_map = sourcemap.ptx_text(PTX)
    lines = text.splitlines()
    mapped = {lines[n - 1].strip(): line for n, _, line in source_map}
    assert mapped["mov.u32 %r18, 0x0;"] == 20
    assert mapped["ld.global.v2.b32 { %r17, %r18 }, [ %rd3 + 0 ];"] == 20
    assert mapped["wgmma.wait_group.sync.aligned 0;"] == 30
    assert "ld.param.b64 \t%rd2, [k_param_0];" not in mapped  # line 0: no line
    assert {line for _, _, line in source_map} == {20, 30}


def test_collapsing_twice_changes_nothing_more():
    once = sourcemap.collapse_inline_asm_locs(PTX)
    assert sourcemap.collapse_inline_asm_locs(once) == once
    assert "\t.loc\t1 21 8" not in once and "\t.loc\t1 31 25" not in once
    assert once.count("\t.loc\t1 20 8") == 4  # one before the block, three in it


def test_the_function_location_names_the_file_and_no_line():
    ttir = (
        "module {\n  tt.func public @k() {\n    tt.return loc(#loc)\n  } loc(#loc)\n} loc(#loc)\n"
    )
    located = triton_build.with_function_location(ttir, "/src/k.py")
    assert '} loc("/src/k.py":0:0)' in located
