"""`pallaslab.diff(a, b)` and `%%kernel ... --diff NAME`: what changed between two versions.

Oracles: hand-made texts with a hand-written alignment; HBM traffic of two seed
matmul block configs computed by hand from the block sizes; summaries written out.
"""

from __future__ import annotations

import html
import importlib.util
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.base import textdiff
from pallaslab._src.core.diffing import align_texts
from pallaslab._src.records.diffs import FIGURE_COLUMNS, LINE_COLUMNS, Delta, Diff, IrDiff, LinePair
from pallaslab._src.views import diffview
from tests import corpus
from tests.test_magic import PRELUDE, run

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


def ops(a: str, b: str, language: str = "mlir") -> list[tuple[str, int | None, int | None]]:
    return [(p.op, p.a_line, p.b_line) for p in align_texts(a, b, language=language)]


# --- Alignment of texts -----------------------------------------------------------


MLIR_A = """\
%0 = tt.get_program_id x : i32
%c64_i32 = arith.constant 64 : i32
%1 = arith.muli %0, %c64_i32 : i32
%2 = tt.splat %1 : i32 -> tensor<64xi32>
%3 = tt.load %2 : tensor<64x!tt.ptr<f32>> loc(#loc3)
tt.return"""

# One line inserted after the first: every later value is renumbered, the constant
# gets a uniquing suffix and its location another alias number.
MLIR_B = """\
%0 = tt.get_program_id x : i32
%1 = tt.get_program_id y : i32
%c64_i32_0 = arith.constant 64 : i32
%2 = arith.muli %0, %c64_i32_0 : i32
%3 = tt.splat %2 : i32 -> tensor<64xi32>
%4 = tt.load %3 : tensor<64x!tt.ptr<f32>> loc(#loc7)
tt.return"""


def test_renumbered_values_are_not_a_change():
    assert ops(MLIR_A, MLIR_B) == [
        ("equal", 1, 1),
        ("insert", None, 2),
        ("equal", 2, 3),
        ("equal", 3, 4),
        ("equal", 4, 5),
        ("equal", 5, 6),
        ("equal", 6, 7),
    ]


def test_a_real_change_is_a_replace_and_extra_lines_are_inserts():
    b = MLIR_A.replace("tensor<64xi32>", "tensor<128xi32>").replace(
        "tt.return", "tt.store %2, %3\nscf.yield\ntt.return"
    )
    assert ops(MLIR_A, b) == [
        ("equal", 1, 1),
        ("equal", 2, 2),
        ("equal", 3, 3),
        ("replace", 4, 4),
        ("equal", 5, 5),
        ("insert", None, 6),
        ("insert", None, 7),
        ("equal", 6, 8),
    ]


def test_an_uneven_replace_pairs_line_by_line_then_deletes():
    a = "x = 1\ny = 2\nz = 3\nend"
    b = "x = 10\nend"
    assert ops(a, b, "") == [
        ("replace", 1, 1),
        ("delete", 2, None),
        ("delete", 3, None),
        ("equal", 4, 2),
    ]


JAXPR_A = """\
{ lambda ; a:Ref<default>{f32[8]} b:Ref<default>{f32[8]}. let
    c:f32[8] <- a[...]
    d:f32[8] = exp c
    b[...] <- d
  in () }"""

# An equation inserted first: jaxprs name variables in order, so every later name moves.
JAXPR_B = """\
{ lambda ; a:Ref<default>{f32[8]} b:Ref<default>{f32[8]}. let
    c:f32[8] <- a[...]
    d:f32[8] = neg c
    e:f32[8] = exp c
    b[...] <- e
  in () }"""


def test_jaxpr_variables_renamed_by_an_inserted_equation_align():
    assert ops(JAXPR_A, JAXPR_B, "jaxpr") == [
        ("equal", 1, 1),
        ("equal", 2, 2),
        ("insert", None, 3),
        ("equal", 3, 4),
        ("equal", 4, 5),
        ("equal", 5, 6),
    ]


@pytest.mark.parametrize(
    ("line", "language", "normal"),
    [
        (
            "%53 = tt.load %52 : tensor<64x!tt.ptr<f32>> loc(#loc12)",
            "mlir",
            "% = tt.load % : tensor<64x!tt.ptr<f32>>",
        ),
        ("%c0_i32_11 = arith.constant 0 : i32", "mlir", "%c0_i32 = arith.constant 0 : i32"),
        ("scf.for %arg3 = %c0 to %9 step %c1", "mlir", "scf.for %arg = %c to % step %c"),
        ("x = tensor<64x64xf32, #blocked1>", "mlir", "x = tensor<64x64xf32, #blocked>"),
        ("\tmad.wide.u32 \t%rd8, %r78, 4, %rd44;", "ptx", "mad.wide.u32 %rd, %r, 4, %rd;"),
        ("$L__BB0_2:", "ptx", "$L:"),
        ("mov.u32 %r1, %tid.x;", "ptx", "mov.u32 %r, %tid.x;"),
        ("  /*0180*/   IMAD R4, R8, 0x40, R3 ;", "sass", "IMAD R, R, 0x40, R ;"),
        ("  %49 = or disjoint i32 %47, 2048", "llvm", "% = or disjoint i32 %, 2048"),
        ("call void @f() #2, !dbg !12", "llvm", "call void @f() #, !dbg !"),
        ("obj at 0x7f00deadbeef", "", "obj at 0x"),
    ],
)
def test_normalised_lines(line, language, normal):
    assert textdiff.normalize(line, language) == normal


def test_short_hex_immediates_are_kept():
    # 0x40 and 0x80 are block sizes in SASS: a change there is a real change.
    assert textdiff.normalize("IMAD R4, R8, 0x40, R3 ;", "sass") != textdiff.normalize(
        "IMAD R4, R8, 0x80, R3 ;", "sass"
    )


def test_changed_constants_are_the_knobs_turned():
    a = "BLOCK_M = 64\nBLOCK_K: int = 32\nNAME = 'x'\nM, N = 256, 512\nf = lambda: 1\n"
    b = "BLOCK_M = 64\nBLOCK_K: int = 64\nNAME = 'y'\nM, N = 256, 1024\nNEW = 3\n"
    assert textdiff.changed_constants(a, b) == [
        ("BLOCK_K", 32, 64),
        ("NAME", "x", "y"),
        ("N", 512, 1024),
    ]
    assert textdiff.changed_constants("%%kernel\nx = (", "x = 1") == []


# --- Two seed-matmul block configs --------------------------------------------------

M = N = 256
K = 128


@pytest.fixture(scope="module")
def two_configs():
    args = corpus.seed_matmul(M, N, K).args
    small = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 32), *args)
    large = pallaslab.inspect(corpus.make_seed_matmul(128, 128, 32), *args)
    return small, large, pallaslab.diff(small, large, resources=False)


def hbm_bytes(bm: int, bn: int, itemsize: int = 4) -> dict[str, int]:
    """Every program copies its (bm, K) block of A, (K, bn) of B and (bm, bn) of C."""
    programs = (M // bm) * (N // bn)
    return {
        "a_ref": programs * bm * K * itemsize,
        "b_ref": programs * K * bn * itemsize,
        "c_ref": programs * bm * bn * itemsize,
    }


def test_traffic_deltas_match_the_block_sizes(two_configs):
    _, _, found = two_configs
    small, large = hbm_bytes(64, 64), hbm_bytes(128, 128)
    for operand in ("a_ref", "b_ref", "c_ref"):
        delta = found.delta(f"HBM traffic {operand}")
        assert (delta.a, delta.b) == (small[operand], large[operand])
    total = found.delta("HBM traffic")
    assert (total.a, total.b) == (sum(small.values()), sum(large.values()))
    # 1280 KiB -> 768 KiB: A and B are read half as often, C once either way.
    assert total.ratio == pytest.approx(768 / 1280)
    assert total.change == "\u221240%"


def test_kernel_and_merit_deltas(two_configs):
    _, _, found = two_configs
    assert found.delta("grid").text() == "grid (4, 4)→(2, 2)"
    assert found.delta("block a_ref").text() == "block a_ref (64, 128)→(128, 128)"
    assert not found.delta("block a_ref").headline
    assert not found.delta("num_warps").changed
    # Working set: every block double-buffered (GPU shared memory for the H100).
    working = found.delta("working set")
    assert (working.a, working.b) == (
        2 * 4 * (64 * K + K * 64 + 64 * 64),
        2 * 4 * (128 * K + K * 128 + 128 * 128),
    )
    fits = found.delta("fits in shared memory")
    assert (fits.a, fits.b) == (True, False)  # 160 KiB fits the H100's 227 KiB; 384 KiB not
    assert found.delta("programs").ratio == pytest.approx(4 / 16)
    assert found.chip == "H100"


def test_summary_names_the_change_then_its_effects(two_configs):
    _, _, found = two_configs
    assert found.summary == (
        "grid (4, 4)→(2, 2), block a_ref (64, 128)→(128, 128), "
        "block b_ref (128, 64)→(128, 128), block c_ref (64, 64)→(128, 128): "
        "HBM traffic \u221240%, working set 160 KiB→384 KiB, fits in shared memory yes→no"
    )


def test_config_names_and_timings_lead_the_summary(two_configs):
    small, large, _ = two_configs
    found = pallaslab.diff(
        small,
        large,
        configs=({"BLOCK_M": 64, "BLOCK_N": 64}, {"BLOCK_M": 128, "BLOCK_N": 128}),
        timings=(2.6, 2.0),
        resources=False,
    )
    assert found.summary.startswith("BLOCK_M 64→128, BLOCK_N 64→128: HBM traffic \u221240%")
    assert found.summary.endswith("1.3x faster")
    # Timings labelled as CPU emulation claim no speedup.
    cpu = types.SimpleNamespace(median_ms=2.0, note="CPU interpret mode", backend="cpu")
    slow = types.SimpleNamespace(median_ms=2.6, note="CPU interpret mode", backend="cpu")
    labelled = pallaslab.diff(small, large, timings=(slow, cpu), resources=False)
    assert "faster" not in labelled.summary
    assert labelled.delta("time").note == "CPU interpret mode"
    # Rows of a tuning table bring their configs along.
    rows = (
        types.SimpleNamespace(median_ms=3.0, config={"BLOCK_M": 64}),
        types.SimpleNamespace(median_ms=1.0, config={"BLOCK_M": 128}),
    )
    tuned = pallaslab.diff(small, large, timings=rows, resources=False)
    assert tuned.summary.startswith("BLOCK_M 64→128:") and tuned.summary.endswith("3x faster")


def test_the_jaxpr_diff_links_both_sides_to_source(two_configs):
    small, _, found = two_configs
    assert [ir.title for ir in found.irs] == [
        "BlockSpecs",
        "kernel body (jaxpr)",
        "Triton IR (TTIR)",
    ]
    jaxpr = found.irs[1]
    changed = [p for p in jaxpr.pairs if p.op != "equal"]
    assert changed  # blocks of 64 and 128 rows: the loads and the dot change
    file = small.kernels[0].source.file
    dot_line = next(
        n
        for n, text in enumerate(Path(file).read_text().splitlines(), 1)
        if "pltriton.dot(" in text
    )
    dot = next(p for p in changed if "dot_general" in p.a_text)
    assert dot.a_sources == dot.b_sources == ((file, dot_line),)
    assert all(bool(p.a_sources) == bool(p.b_sources) for p in changed)
    assert {f for p in changed for f, _ in p.a_sources} == {file}
    lowered = found.irs[2]
    assert lowered.a_target == lowered.b_target == "triton"
    assert lowered.changed and not lowered.a_error


def test_the_frames_columns(two_configs):
    _, _, found = two_configs
    figures = found.to_frame()
    assert tuple(figures.columns) == FIGURE_COLUMNS
    row = figures.set_index("figure").loc["HBM traffic"]
    assert (row["group"], row["better"], row["change"]) == ("tiles", "lower", "\u221240%")
    lines = found.to_frame("lines")
    assert tuple(lines.columns) == LINE_COLUMNS
    assert set(lines["op"]) <= {"equal", "insert", "delete", "replace"}
    assert len(lines) == sum(len(ir.pairs) for ir in found.irs)
    with pytest.raises(ValueError, match="'figures' or 'lines'"):
        found.to_frame("rows")  # type: ignore[arg-type]


def test_text_and_html_show_the_summary_and_the_changed_lines(two_configs):
    _, _, found = two_configs
    text = found.text()
    assert text.splitlines()[1] == found.summary
    assert "  - " in text and "  + " in text and "HBM traffic" in text
    bundle = found._repr_mimebundle_()
    assert bundle["text/plain"] == text
    page = bundle["text/html"]
    assert html.escape(found.summary) in page and "pl-diff-replace" in page
    assert "<script" not in page


@needs_triton
def test_ptx_resources_of_both_configs():
    args = corpus.seed_matmul(M, N, K).args
    small = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 32), *args)
    large = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 64), *args)
    found = pallaslab.diff(small, large)
    registers = found.delta("registers per thread")
    shared = found.delta("shared memory")
    assert registers.a and registers.b and shared.a and shared.b
    # BLOCK_K 32 -> 64 doubles the pipelined A and B tiles in shared memory.
    assert shared.b > 1.5 * shared.a
    occupancy = found.delta("occupancy on H100")
    assert occupancy.b < occupancy.a
    assert f"occupancy on H100 {occupancy.a:.0f}%→{occupancy.b:.0f}%" in found.summary


# --- One kernel on two targets, failures, hand-made records -------------------------


def test_one_kernel_on_two_tpu_generations():
    case = corpus.blocked_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    found = pallaslab.diff(inspection, "mosaic-tpu:v5e", "mosaic-tpu:v6e")
    assert (found.a_name, found.b_name) == (
        "add_kernel @ mosaic-tpu:v5e",
        "add_kernel @ mosaic-tpu:v6e",
    )
    assert found.delta("target").text() == "target mosaic-tpu:v5e→mosaic-tpu:v6e"
    assert [ir.title for ir in found.irs] == ["Mosaic TPU for v5e / Mosaic TPU for v6e"]
    assert found.chip == "v5e / v6e"
    with pytest.raises(TypeError, match="name both"):
        pallaslab.diff(inspection, "mosaic-tpu:v5e")
    with pytest.raises(TypeError, match="compares inspections"):
        pallaslab.diff(case.fn, inspection)
    with pytest.raises(ValueError, match="unknown target"):
        pallaslab.diff(inspection, inspection, target="ptx:sm_9O")


def _add(block: int):
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 1024), jnp.float32),
        grid=(1024 // block,),
        in_specs=[pl.BlockSpec((8, block), lambda i: (0, i))] * 2,
        out_specs=pl.BlockSpec((8, block), lambda i: (0, i)),
    )


def test_a_side_the_target_cannot_take_says_why():
    spec = jax.ShapeDtypeStruct((8, 1024), jnp.float32)
    good = pallaslab.inspect(_add(128), spec, spec)
    bad = pallaslab.inspect(_add(100), spec, spec)  # 1024 / 100: breaks the (8, 128) rule
    found = pallaslab.diff(good, bad)
    lowered = found.irs[-1]
    assert lowered.a_error == "" and "tiling rule" in lowered.b_error
    assert lowered.pairs == ()
    assert "b failed" in lowered.describe()
    tiling = found.delta("tiling problems")
    assert (tiling.a, tiling.b) == (0, None)  # b has no lowering, so no resources
    assert found.delta("block x_ref").text() == "block x_ref (8, 128)→(8, 100)"


def test_check_results_are_compared():
    spec = jax.ShapeDtypeStruct((8, 1024), jnp.float32)
    a = pallaslab.inspect(_add(128), spec, spec)
    b = pallaslab.inspect(_add(256), spec, spec)
    x = jnp.ones((8, 1024))
    a = a.with_result(a.run(x, x, ref=lambda p, q: p + q))
    b = b.with_result(b.run(x, x, ref=lambda p, q: p - q))  # a wrong reference: differs
    found = pallaslab.diff(a, b)
    assert found.delta("check").text() == "check matches→differs"
    assert "check matches→differs" in found.summary
    assert found.delta("max abs error").b == pytest.approx(2.0)


def test_static_html_escapes_every_text():
    evil = "<img src=x onerror=alert(1)>"
    found = Diff(
        a_name=evil,
        b_name="b",
        a_kernel=evil,
        b_kernel="k",
        chip="H100",
        deltas=(Delta("config", evil, 1, 2),),
        irs=(
            IrDiff(
                title=evil,
                a_target="t",
                b_target="t",
                language="mlir",
                pairs=(
                    LinePair("replace", 1, 1, evil, "ok", ((evil, 3),), ()),
                    LinePair("equal", 2, 2, "x", "x"),
                ),
            ),
        ),
        notes=(evil,),
    )
    page = diffview.static_html(found)
    assert "<img" not in page and html.escape(evil) in page
    assert found.summary == f"{evil} 1→2: no change in resources, traffic, check or timing"


def test_programs_of_several_kernels_say_which_pair_is_compared():
    case = corpus.two_kernels()
    inspection = pallaslab.inspect(case.fn, *case.args)
    first, second = (k.name for k in inspection.kernels)
    found = pallaslab.diff(inspection, inspection, kernel=(0, 1))
    assert (found.a_kernel, found.b_kernel) == (first, second)
    assert any("a has 2 kernel(s), b 2" in n for n in found.notes)
    assert found.delta("kernel").text() == f"kernel {first}→{second}"


def test_identical_inspections_have_no_difference():
    case = corpus.blocked_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    again = pallaslab.inspect(case.fn, *case.args)
    found = pallaslab.diff(inspection, again)
    assert found.changes == ()
    assert found.summary == "no difference: same blocks, grid, params, IR and figures"
    assert all(ir.changed == 0 for ir in found.irs)


# --- The magic's --diff ----------------------------------------------------------------

CELL = (
    PRELUDE
    + """
BLOCK = {block}

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8, 1024), jnp.float32),
                     grid=(1024 // BLOCK,),
                     in_specs=[pl.BlockSpec((8, BLOCK), lambda i: (0, i))] * 2,
                     out_specs=pl.BlockSpec((8, BLOCK), lambda i: (0, i)))
x = jnp.ones((8, 1024)); y = 2 * x
"""
)


def test_magic_diff_compares_with_the_previous_version(ip):
    first, _ = run(ip, "add(x, y) --no-run", CELL.format(block=128))
    assert first.success, first.error_in_exec
    before = ip.user_ns["_kernel"]
    result, captured = run(ip, "add(x, y) --no-run --diff _kernel", CELL.format(block=256))
    assert result.success, result.error_in_exec
    assert ip.user_ns["_kernel"] is not before
    found = ip.user_ns["_diff"]
    assert found.summary.startswith("BLOCK 128→256: ")
    assert found.a_name == "_kernel" and found.b_name == "this cell"
    assert found.delta("block x_ref").text() == "block x_ref (8, 128)→(8, 256)"
    shown = [o.data for o in captured.outputs if "text/html" in o.data]
    assert any(found.summary in d["text/plain"] for d in shown)


def test_magic_diff_without_a_previous_inspection_keeps_the_cell(ip):
    ip.user_ns.pop("_nothing", None)
    result, captured = run(ip, "add(x, y) --no-run --diff _nothing", CELL.format(block=128))
    assert result.success, result.error_in_exec
    assert "_kernel" in ip.user_ns
    assert "--diff: _nothing holds nothing, not an inspection" in captured.stderr
    bad, _ = run(ip, "add(x, y) --diff 1x", CELL.format(block=128))
    assert "--diff takes the Python name" in str(bad.error_in_exec)


# --- The Diff tab: one view model, drawn live and saved ------------------------------


def long_diff(lines: int, every: int) -> Diff:
    """An IR of `lines` lines where every `every`-th line changed."""
    pairs = tuple(
        LinePair("replace", k, k, f"%{k} = old {'x' * 200}", f"%{k} = new")
        if k % every == 0
        else LinePair("equal", k, k, f"%{k} = same", f"%{k} = same")
        for k in range(1, lines + 1)
    )
    ir = IrDiff("Triton IR", "triton", "triton", "mlir", pairs)
    return Diff("a", "b", "k", "k", "H100", irs=(ir,))


def test_the_diff_tab_draws_changes_with_context_and_counts_the_rest():
    from pallaslab._src.views.diffmodel import CONTEXT, diff_pane

    model = diff_pane(long_diff(100, 50))
    (ir,) = model["irs"]
    ops = [r["op"] for r in ir["rows"]]
    # Line 50 and 100 changed: 3 equal lines around each, the rest gaps.
    around = ["equal"] * CONTEXT
    assert ops == ["gap", *around, "replace", *around, "gap", *around, "replace"]
    assert [r["hidden"] for r in ir["rows"] if r["op"] == "gap"] == [46, 43]
    assert (ir["changed"], ir["lines"], ir["more"]) == (2, 100, 0)
    changed = ir["rows"][CONTEXT + 1]
    assert (changed["aLine"], changed["bLine"], changed["bText"]) == (50, 50, "%50 = new")


def test_a_long_diff_stays_far_under_the_message_limit():
    from pallaslab._src.views.diffmodel import IR_CHARS, diff_pane
    from pallaslab._src.views.diffview import DiffView
    from pallaslab._src.views.inspector import MAX_PANE_BYTES, json_size

    found = long_diff(60_000, 2)  # 30,000 changed lines of 200+ characters
    model = diff_pane(found)
    (ir,) = model["irs"]
    drawn = sum(r["op"] == "replace" for r in ir["rows"])
    assert drawn + ir["more"] == 30_000 and ir["more"] > 0
    assert sum(len(r["aText"]) + len(r["bText"]) for r in ir["rows"]) < IR_CHARS + 2_000
    assert json_size(DiffView(found).pane_diff) < MAX_PANE_BYTES
    page = diffview.static_html(found)
    assert f"… {ir['more']} more changed lines" in page


def test_figures_are_grouped_and_judged(two_configs):
    from pallaslab._src.views.diffmodel import diff_pane

    _, _, found = two_configs
    model = diff_pane(found)
    titles = [g["title"] for g in model["groups"]]
    assert titles == ["Kernel", "Figures of merit"]  # no config, no run, no timing
    kernel = next(g for g in model["groups"] if g["id"] == "kernel")
    # The kernel group lists what changed only: blocks and grid, not the dtypes.
    assert {f["name"] for f in kernel["figures"]} >= {"grid", "block a_ref", "block b_ref"}
    assert all(f["changed"] for f in kernel["figures"]) and kernel["unchanged"] > 0
    merit = {
        f["name"]: f for f in next(g for g in model["groups"] if g["id"] == "tiles")["figures"]
    }
    # 128x128 blocks read A and B half as often: less HBM traffic is better.
    assert merit["HBM traffic"]["verdict"] == "better"
    assert merit["working set"]["changed"] and merit["programs"]["verdict"] == ""
    assert model["summary"] == found.summary


def test_a_diff_shows_as_the_inspector_front_end_with_one_diff_tab(two_configs):
    from pallaslab._src.views.diffview import DiffView
    from pallaslab._src.views.inspector import Inspector

    _, _, found = two_configs
    view = DiffView(found)
    assert view._esm == Inspector._esm
    assert view.tabs == [{"id": "diff", "title": "Diff"}] and view.selected == "diff"
    assert view.header["badges"] == [f"kernel {found.a_kernel}", f"figures for {found.chip}"]
    assert view.pane_diff["summary"] == found.summary
    bundle = found._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == found.text()
