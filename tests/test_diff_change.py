"""A diff shows the change: index maps compared as expressions, correctness first.

The planted bug of a matmul: B's index map `(0, i)` where it should read `(0, j)`.
Fixing it changes no line of the kernel body; it changes which block of B each
program gets, the output (a check against `a @ b`: differs → matches), and the HBM
traffic (B is read block by block instead of one block again and again: more
bytes). The diff must name the index map, lead with the fix, and not call the fix's
traffic a slowdown. Oracles: the two index maps as written, NumPy's matmul for the
check, and the bytes each version's tile map moves (counted by hand below).
"""

from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.base import sources, textdiff
from pallaslab._src.records import indexmap
from pallaslab._src.views import diffmodel, diffview
from pallaslab._src.views.inspector import MAX_PANE_BYTES, json_size
from pallaslab._src.views.statichtml.nodes import STYLES

M, K, N = 128, 64, 256
BM, BN = 32, 64


def make_matmul(b_map):
    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    def matmul(a, b):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
            grid=(M // BM, N // BN),
            in_specs=[pl.BlockSpec((BM, K), lambda i, j: (i, 0)), pl.BlockSpec((K, BN), b_map)],
            out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        )(a, b)

    return matmul


A = jnp.asarray(np.random.default_rng(0).standard_normal((M, K)), jnp.float32)
B = jnp.asarray(np.random.default_rng(1).standard_normal((K, N)), jnp.float32)


def checked(b_map):
    inspection = pallaslab.inspect(make_matmul(b_map), A, B)
    return inspection.with_result(inspection.run(ref=lambda a, b: a @ b))


@pytest.fixture(scope="module")
def fix():
    buggy = checked(lambda i, j: (0, i))
    fixed = checked(lambda i, j: (0, j))
    return buggy, fixed, pallaslab.diff(buggy, fixed)


def test_the_fix_leads_the_summary_and_names_the_index_map(fix):
    buggy, fixed, found = fix
    assert not buggy.result.comparison.ok and fixed.result.comparison.ok
    assert found.verdict == "fix"
    assert found.summary.startswith("fixed: check differs→matches; ")
    assert "index map b_ref lambda i, j: (0, i)→lambda i, j: (0, j)" in found.summary
    index_map = found.delta("index map b_ref")
    assert (index_map.a, index_map.b) == ("lambda i, j: (0, i)", "lambda i, j: (0, j)")
    assert not found.delta("index map a_ref").changed
    assert found.changes[0].name == "check"


def test_more_traffic_for_the_fix_is_not_a_red_headline(fix):
    _, _, found = fix
    # B is K x BN per program: the buggy map reads B's block i (4 distinct, each for
    # a run of j); the fixed map a new block for every program.
    traffic = found.delta("HBM traffic")
    assert traffic.b > traffic.a
    model = diffmodel.diff_pane(found)
    assert model["verdict"] == "better"
    assert model["groups"][0]["id"] == "check"
    figures = {f["name"]: f for g in model["groups"] for f in g["figures"]}
    assert figures["check"]["verdict"] == "better"
    assert figures["HBM traffic"]["verdict"] == ""
    assert figures["HBM traffic"]["note"] == diffmodel.FIX_NOTE
    page = diffview.static_html(found)
    summary = page[page.index("<p") : page.index("fixed: check")]
    assert STYLES["pl-diff-better"] in summary


def test_a_regression_is_red_and_first(fix):
    buggy, fixed, _ = fix
    found = pallaslab.diff(fixed, buggy)
    assert found.verdict == "regression"
    assert found.summary.startswith("regression: check matches→differs; ")
    model = diffmodel.diff_pane(found)
    assert model["verdict"] == "worse"
    assert model["groups"][0]["id"] == "check"
    figures = {f["name"]: f for g in model["groups"] for f in g["figures"]}
    assert figures["check"]["verdict"] == "worse"
    assert figures["HBM traffic"]["verdict"] == ""  # fewer bytes, but wrong


def test_the_blockspecs_show_the_changed_index_map_at_its_line(fix):
    _, fixed, found = fix
    blockspecs = found.irs[0]
    assert blockspecs.title == "BlockSpecs"
    changed = [p for p in blockspecs.pairs if p.op != "equal"]
    assert len(changed) == 1 and changed[0].op == "replace"
    assert "index map lambda i, j: (0, i)" in changed[0].a_text
    assert "index map lambda i, j: (0, j)" in changed[0].b_text
    operand = fixed.kernels[0].operands[1]
    assert changed[0].b_sources == ((operand.index_map.source_file, operand.index_map.source_line),)
    # The body is the same: its jaxpr says so, now under its own name.
    body = found.irs[1]
    assert body.title == "kernel body (jaxpr)" and body.changed == 0


def test_index_maps_are_compared_as_expressions():
    spec = jax.ShapeDtypeStruct
    renamed = pallaslab.inspect(make_matmul(lambda m, n: (0, n)), spec((M, K), jnp.float32), B)
    fixed = pallaslab.inspect(make_matmul(lambda i, j: (0, j)), A, B)
    found = pallaslab.diff(renamed, fixed)
    assert not found.delta("index map b_ref").changed
    assert found.irs[0].changed == 0
    maps = [k.operands[1].index_map for k in (renamed.kernels[0], fixed.kernels[0])]
    assert indexmap.same_structure(*maps)
    assert indexmap.renamed(maps[0], ("p", "q")) == "lambda p, q: (0, q)"
    shifted = pallaslab.inspect(make_matmul(lambda i, j: (0, (j + 1) % (N // BN))), A, B)
    assert not indexmap.same_structure(maps[1], shifted.kernels[0].operands[1].index_map)


def test_a_body_jaxpr_is_aligned_equation_by_equation():
    jaxpr_a = textwrap.dedent(
        """\
        { lambda ; a:Ref<default>{f32[8]} b:Ref<default>{f32[8]}. let
            c:f32[8] <- a[...]
            d:f32[8] = scan[
              jaxpr={ lambda ; e:f32[8]. let
                  f:f32[8] = mul e 2.0:f32[]
                in (f,) }
              length=4
            ] c
            b[...] <- d
          in () }"""
    ).splitlines()
    jaxpr_b = [line.replace("mul e 2.0", "mul e 3.0") for line in jaxpr_a]
    jaxpr_b.insert(8, "    g:f32[8] = add d 1.0:f32[]")
    units = textdiff.equation_units(jaxpr_a)
    assert units == [(0, 1), (1, 2), (2, 8), (8, 9), (9, 10)]
    opcodes = textdiff.align(jaxpr_a, jaxpr_b, "jaxpr")
    changed = [(op, i1, i2, j1, j2) for op, i1, i2, j1, j2 in opcodes if op != "equal"]
    # Inside the scan only its body's line differs; after it one equation is added.
    assert changed == [("replace", 4, 5, 4, 5), ("insert", 8, 8, 8, 9)]


def test_one_huge_changed_constant_hides_nothing():
    table_a = "TABLE = (" + ", ".join(f"{k / 7:.6f}" for k in range(300_000)) + ")"
    table_b = table_a.replace("TABLE = (0.000000", "TABLE = (1.000000", 1)
    assert len(table_a) > 2 * MAX_PANE_BYTES
    cell = textwrap.dedent(
        """\
        import jax, jax.numpy as jnp
        from jax.experimental import pallas as pl
        {table}
        BLOCK = {block}

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0

        def fn(x):
            return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                grid=(x.shape[0] // BLOCK,),
                in_specs=[pl.BlockSpec((BLOCK, 128), lambda i: ({row}, 0))],
                out_specs=pl.BlockSpec((BLOCK, 128), lambda i: (i, 0)))(x)
        """
    )
    inspections = []
    for k, (table, block, row) in enumerate(((table_a, 8, "i"), (table_b, 16, "0"))):
        text = cell.format(table=table, block=block, row=row)
        file = f"<huge-constant-cell-{k}>"
        sources.register_cell(file, f"Cell [{k + 1}]", text)
        namespace: dict = {}
        exec(compile(text, file, "exec"), namespace)
        inspections.append(pallaslab.inspect(namespace["fn"], jnp.ones((64, 128))))
    found = pallaslab.diff(*inspections)
    assert found.delta("TABLE").changed and found.delta("BLOCK").text() == "BLOCK 8→16"
    assert len(found.summary) < 1000
    assert "TABLE" in found.summary and "BLOCK 8→16" in found.summary
    pane = diffview.pane(found)
    assert "error" not in pane
    assert json_size(pane) < MAX_PANE_BYTES // 4
    figures = {f["name"]: f for g in pane["groups"] for f in g["figures"]}
    assert "index map x_ref" in figures and figures["index map x_ref"]["changed"]
    assert len(figures["TABLE"]["a"]) <= diffmodel.MAX_LINE + 40
    assert len(found.text()) < 20_000


PRELUDE = """\
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
a = jnp.asarray(np.random.default_rng(0).standard_normal((128, 64)), jnp.float32)
b = jnp.asarray(np.random.default_rng(1).standard_normal((64, 256)), jnp.float32)

def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

matmul = pl.pallas_call(
    kernel,
    out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32),
    grid=(4, 4),
    in_specs=[pl.BlockSpec((32, 64), lambda i, j: (i, 0)),
              pl.BlockSpec((64, 64), lambda i, j: (0, {b_index}))],
    out_specs=pl.BlockSpec((32, 64), lambda i, j: (i, j)),
)
"""


def test_the_magic_diff_of_the_fix(ip):
    with capture_output():
        first = ip.run_cell('%%kernel matmul(a, b) --ref "a @ b"\n' + PRELUDE.format(b_index="i"))
        second = ip.run_cell(
            '%%kernel matmul(a, b) --ref "a @ b" --diff _kernel\n' + PRELUDE.format(b_index="j")
        )
    assert first.success and second.success
    found = ip.user_ns["_diff"]
    assert found.summary.startswith("fixed: check differs→matches; ")
    assert "index map b_ref lambda i, j: (0, i)→lambda i, j: (0, j)" in found.summary
    model = diffmodel.diff_pane(found)
    assert model["verdict"] == "better" and json.dumps(model)
