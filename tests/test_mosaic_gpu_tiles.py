"""Mosaic GPU kernels mapped: SMEM budgets, copies and their windows, products, pipelines.

The kernels are ours, one per style (`tests/mosaic_gpu_pipelines.py`). Oracles: every
figure is computed by hand here from the kernels' shapes (bytes of each buffer and
barrier, each buffer aligned to 1 KiB as Mosaic GPU's lowering does; copies as CTAs x
steps; FLOPs as 2 * M * N * K), Mosaic GPU's own resource estimate (its lowering's
`_estimate_resources`) where this JAX has it, the shared memory Mosaic GPU's lowering
launches the kernel with (the `mosaic-gpu` target's module, lowered on the CPU), and each
window checked against the index map written in the kernel.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallaslab
from pallaslab._src.core.program import program_of
from pallaslab._src.geometry.mosaic_gpu import CopyMap, aligned
from pallaslab._src.records import hardware
from pallaslab._src.views import tilesdata
from pallaslab._src.views.static_page import static_tab
from tests import mosaic_gpu_pipelines as kernels

KiB = 1024
F16 = 2  # bytes


def inspect(builder, **options):
    fn, args = builder(**options)
    return pallaslab.inspect(fn, *args)


@pytest.fixture(scope="module")
def tma():
    return inspect(kernels.tma_wgmma_matmul)


@pytest.fixture(scope="module")
def warp_specialized():
    return inspect(kernels.warp_specialized_matmul)


@pytest.fixture(scope="module")
def persistent():
    return inspect(kernels.persistent_matmul)


@pytest.fixture(scope="module")
def manual():
    return inspect(kernels.manual_copies)


@pytest.fixture(scope="module")
def tcgen05():
    return inspect(kernels.tcgen05_matmul)


def copies_of(plan, operand):
    return [c for c in plan.copies if c.operand == operand]


# --- A TMA + wgmma matmul with emit_pipeline (256 x 512 @ 512 x 256, tiles 128/128/64) ---


def test_tma_matmul_smem_is_buffers_times_slots_plus_barriers(tma):
    budget = tma.smem()
    a_slots = 3 * 128 * 64 * F16  # max_concurrent_steps x the (128, 64) window
    b_slots = 3 * 64 * 128 * F16
    out = 128 * 128 * F16
    assert budget.buffer_bytes == aligned(a_slots) + aligned(b_slots) + aligned(out) == 131072
    assert budget.barriers == 3  # one per slot, for the copies landing
    assert budget.total == 131072 + 3 * 8
    fits = {c: budget.on_chip(c) for c in ("A100", "H100", "H200", "B200")}
    assert [f.limit for f in fits.values()] == [163 * KiB, 227 * KiB, 227 * KiB, 227 * KiB]
    assert all(f.fits for f in fits.values())
    assert fits["H100"].share == pytest.approx(131096 / (227 * KiB))


def test_tma_matmul_pipeline_steps_slots_and_transforms(tma):
    plan = tma.plan()
    (pipeline,) = plan.pipelines
    assert (pipeline.kind, pipeline.steps, pipeline.slots, pipeline.runs) == (
        "emit_pipeline",
        512 // 64,
        3,
        1.0,
    )
    assert pipeline.location.line == kernels_line("pipeline-line")
    buffers = {a.label: a for a in plan.smem.walk() if a.pipeline == 0 and a.kind == "buffer"}
    a_buffer = buffers["pipeline buffer of a_gmem"]
    assert a_buffer.shape == (3, 128, 64)
    assert a_buffer.stored_shape == (3, 128 // 8, 64 // 64, 8, 64)  # tiled (8, 64)
    assert [t.text for t in a_buffer.transforms] == [
        "TilingTransform((8, 64))",
        "SwizzleTransform(128)",
    ]


def test_tma_matmul_copies_work_and_windows(tma):
    plan = tma.plan()
    ctas, steps = 2 * 2, 8
    (a_copy,) = copies_of(plan, 0)
    (b_copy,) = copies_of(plan, 1)
    (out_copy,) = copies_of(plan, 2)
    assert (a_copy.kind, a_copy.window, a_copy.copies) == ("tma-load", (128, 64), ctas * steps)
    assert a_copy.bytes_each == 128 * 64 * F16
    assert (b_copy.window, b_copy.copies) == ((64, 128), ctas * steps)
    assert (out_copy.kind, out_copy.window, out_copy.copies) == ("tma-store", (128, 128), ctas)
    assert out_copy.location.line == kernels_line("store-line")
    assert plan.gmem_bytes == 2 * ctas * steps * 128 * 64 * F16 + ctas * 128 * 128 * F16
    (mma,) = plan.mmas
    assert (mma.kind, mma.m, mma.n, mma.k, mma.count) == ("wgmma", 128, 128, 64, ctas * steps)
    assert mma.location.line == kernels_line("wgmma-line")
    assert plan.mma_flops == 2 * 256 * 256 * 512
    tiles = tma.tiles()
    assert isinstance(tiles, CopyMap)
    assert tiles.grid == (2, 2, steps)
    # CTA (m=1, n=0), step 3: rows of block m, columns of step 3 (`lambda kk: (mi, kk)`).
    assert tiles.ranges(0, (1, 0, 3)) == ((128, 256), (192, 256))
    assert tiles.ranges(1, (1, 0, 3)) == ((192, 256), (0, 128))
    # Every element of A is copied once per column block of C, of B once per row block.
    assert np.all(tiles.read_counts(0) == 2)
    assert np.all(tiles.read_counts(1) == 2)
    merit = tma.merit()
    assert merit.hbm_bytes == plan.gmem_bytes
    assert merit.flops == 2 * 256 * 256 * 512
    assert merit.working_set_bytes == tma.smem().total
    assert merit.on_chip("H100").capacity_bytes == 227 * KiB


def test_the_kernel_records_work_counts_wgmma(tma):
    """`Kernel.work` (what benchmarks and rooflines read) counts the tensor-core products."""
    work = tma.kernels[0].work
    assert work.matmul_flops == 2 * 256 * 256 * 512
    assert work.matmul_dtypes == ("float16",)
    assert work.exact


# --- A warp-specialized pipeline: one memory warpgroup, two compute warpgroups ---------


def test_warp_specialized_pipeline(warp_specialized):
    plan = warp_specialized.plan()
    assert plan.grid == (4, 2)
    assert plan.threads == 3
    (pipeline,) = plan.pipelines
    assert (pipeline.kind, pipeline.steps, pipeline.slots) == (
        "emit_pipeline_warp_specialized",
        256 // 64,
        2,
    )
    ctas = 8
    assert [c.copies for c in copies_of(plan, 0)] == [ctas * 4]  # the memory warpgroup's
    (store,) = copies_of(plan, 2)
    assert (store.kind, store.window, store.copies) == ("store", (64, 64), ctas * 2)
    (mma,) = plan.mmas
    assert (mma.m, mma.n, mma.k, mma.count) == (64, 64, 64, ctas * 2 * 4)
    assert plan.mma_flops == 2 * 256 * 256 * 256
    budget = warp_specialized.smem()
    buffers = aligned(2 * 64 * 64 * F16) + aligned(2 * 64 * 128 * F16)
    assert budget.total == buffers + 8 * (2 + 2)  # barriers: slots landed, slots consumed
    labels = {line.allocation.label for line in budget.lines}
    assert {"pipeline barriers: copies landed", "pipeline barriers: slots consumed"} <= labels


# --- A persistent kernel: one CTA per SM looping over tiles ---------------------------


def test_persistent_kernel_loops_over_tiles(persistent):
    plan = persistent.plan()
    loop = plan.persistent
    tiles = (512 // 128) * (512 // 128)
    assert plan.ctas == 132
    assert (loop.items, loop.least, loop.most) == (tiles, 0, 1)
    assert loop.location.line == kernels_line("tile-loop-line")
    (a_copy,) = copies_of(plan, 0)
    assert a_copy.copies == tiles * (256 // 64)
    (pipeline,) = plan.pipelines
    assert (pipeline.steps, pipeline.slots) == (4, 2)
    assert plan.flops == plan.mma_flops == 2 * 512 * 512 * 256
    assert persistent.smem().total == 2 * aligned(2 * 128 * 64 * F16) + 2 * 8
    # CTA 5 takes tile 5: block row 1, block column 1.
    copies = persistent.tiles()
    assert copies.ranges(0, (5, 0)) == ((128, 256), (0, 64))
    assert copies.ranges(1, (5, 3)) == ((192, 256), (128, 256))


def test_persistent_kernel_traced_for_more_sms_loops_less():
    plan = inspect(kernels.persistent_matmul, num_sms=4).plan()
    assert (plan.persistent.items, plan.persistent.least, plan.persistent.most) == (16, 4, 4)


# --- A manual-copy kernel with barriers -----------------------------------------------


def test_manual_copies_and_barriers(manual):
    plan = manual.plan()
    assert plan.pipelines == ()
    rows = 64 * 128 * 4
    (load,) = copies_of(plan, 0)
    (store,) = copies_of(plan, 1)
    assert (load.kind, load.window, load.copies, load.bytes_each) == (
        "tma-load",
        (64, 128),
        8,
        rows,
    )
    assert load.location.line == kernels_line("manual-load-line")
    assert (store.kind, store.copies) == ("tma-store", 8)
    assert manual.smem().total == 2 * aligned(2 * rows) + 2 * 8
    tiles = manual.tiles()
    assert [tiles.ranges(0, (0, s))[0] for s in range(8)] == [
        (64 * s, 64 * s + 64) for s in range(8)
    ]
    assert np.all(tiles.read_counts(0) == 1) and np.all(tiles.read_counts(1) == 1)
    assert plan.flops == 2 * 512 * 128  # x * 2 + 1


# --- A Blackwell tcgen05 kernel -------------------------------------------------------


def test_tcgen05_kernel(tcgen05):
    plan = tcgen05.plan()
    (mma,) = plan.mmas
    assert (mma.kind, mma.m, mma.n, mma.k, mma.count) == ("tcgen05", 128, 128, 128, 1)
    assert mma.location.line == kernels_line("tcgen05-line")
    budget = tcgen05.smem()
    assert budget.total == 2 * 128 * 128 * F16 + 2 * 8 + 4  # + the TMEM address
    assert budget.tmem_bytes == 4
    assert budget.on_chip("B200", plan).note == ""
    assert "Blackwell" in budget.on_chip("H100", plan).note


# --- pl.kernel on a GPU mesh, and pl.core_map (closing over its refs) --------------------


@pytest.mark.parametrize("closed_over", [False, True])
def test_mesh_kernels_map_each_ctas_rows(closed_over):
    inspection = inspect(kernels.pl_kernel_rows, closed_over=closed_over)
    plan = inspection.plan()
    load, store = plan.copies
    assert (load.kind, load.operand, load.window, load.copies) == ("load", 0, (128, 128), 2)
    assert (store.kind, store.operand, store.copies) == ("store", 1, 2)
    assert load.location.line == kernels_line("rows-line")
    tiles = inspection.tiles()
    assert tiles.grid == (2, 1)
    assert tiles.ranges(0, (1, 0)) == ((128, 256), (0, 128))
    assert np.all(tiles.read_counts(1) == 1)  # each row written by one CTA: no race


# --- A pallas_call with Mosaic GPU params ---------------------------------------------


def test_pallas_call_pipelines_its_sequential_axis():
    inspection = inspect(kernels.pallas_call_matmul)
    plan = inspection.plan()
    (pipeline,) = plan.pipelines
    assert (pipeline.kind, pipeline.steps, pipeline.slots) == ("pallas_call", 256 // 64, 2)
    budget = inspection.smem()
    blocks = 2 * (128 * 64 + 64 * 128 + 128 * 128) * F16
    assert budget.total == blocks + 2 * 8  # one barrier per slot
    merit = inspection.merit()
    # Inputs every step of every CTA; the output block once per CTA, at its last step.
    assert merit.hbm_bytes == 2 * 16 * 128 * 64 * F16 + 4 * 128 * 128 * F16
    assert merit.flops == 2 * 256 * 256 * 256


# --- JAX's own Hopper matmul, traced for an H100 -------------------------------------


def test_jax_hopper_matmul_plan_matches_mosaic_gpus_own_estimate():
    hopper = pytest.importorskip("jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu")
    config = hopper.TuningConfig(
        tile_m=128,
        tile_n=128,
        tile_k=64,
        max_concurrent_steps=4,
        grid_minor_dim=hopper.MatmulDimension.N,
        cluster_dimension=hopper.MatmulDimension.N,
    )
    a = jax.ShapeDtypeStruct((1024, 1024), jnp.float16)
    with h100_mesh():
        inspection = pallaslab.inspect(lambda x, y: hopper.matmul(x, y, None, config), a, a)
        plan = inspection.plan()
    assert plan.grid == (66, 2) and plan.threads == 3  # clusters of 2, 3 warpgroups each
    assert plan.mma_flops == 2 * 1024**3
    # Each CTA of a cluster takes each of its cluster's (128, 512) tiles.
    assert plan.persistent.items == (1024 // 128) * (1024 // 512) * 2
    # Clusters of 2 CTAs along N share each A window (a multicast copy): A crosses from
    # GMEM once per cluster column of 512, 1024 // 512 = 2 times in all.
    (a_copy,) = [c for c in plan.copies if c.operand == 0]
    assert a_copy.multicast == 2
    assert a_copy.gmem_bytes == 2 * 1024 * 1024 * 2
    expected = mosaic_estimate(inspection)
    assert inspection.smem().buffer_bytes == expected[0]
    assert inspection.smem().barriers == expected[1]


def h100_mesh():
    sharding = jax.sharding
    device = sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", platform="gpu", num_cores=132
    )
    return sharding.use_abstract_mesh(sharding.AbstractMesh((), (), abstract_device=device))


def mosaic_estimate(inspection):
    """(SMEM scratch bytes, barriers) by Mosaic GPU's own resource estimate of the body."""
    lowering = pytest.importorskip("jax._src.pallas.mosaic_gpu.lowering")
    if not hasattr(lowering, "_estimate_resources"):
        pytest.skip("this JAX has no Mosaic GPU resource estimate to compare with")
    site = program_of(inspection).sites[0]
    mesh = site.params["meshes"][0] if "meshes" in site.params else site.params["mesh"]
    body = site.params["jaxprs"][0] if "jaxprs" in site.params else site.params["jaxpr"]
    names = lowering._AxisNames(mesh.grid_names, mesh.cluster_names, mesh.thread_name)
    params = site.params.get("compiler_params") or kernels.plgpu.CompilerParams()
    context = lowering.ResourceEstimatorContext(
        reduction_scratch_bytes=params.reduction_scratch_bytes,
        axis_names=names,
        lowering_semantics=params.lowering_semantics,
    )
    resources = lowering._estimate_resources(context, body)
    barriers = sum(b.num_barriers for b in resources.barriers)
    return resources.smem_scratch_bytes, barriers


def test_our_kernels_smem_matches_mosaic_gpus_own_estimate(tma, warp_specialized, manual):
    for inspection in (tma, warp_specialized, manual):
        budget = inspection.smem()
        assert (budget.buffer_bytes, budget.barriers) == mosaic_estimate(inspection)


@pytest.mark.parametrize(
    "builder",
    [
        kernels.tma_wgmma_matmul,
        kernels.warp_specialized_matmul,
        kernels.persistent_matmul,
        kernels.manual_copies,
        kernels.tcgen05_matmul,
        kernels.pallas_call_matmul,
    ],
)
def test_smem_is_what_mosaic_gpus_lowering_launches_with(builder):
    """Oracle: the `dynamic_shared_memory_size` of the kernel's launch, as Mosaic GPU lowers it."""
    inspection = inspect(builder)
    lowered = inspection.lower("mosaic-gpu")
    assert lowered.error is None
    launched = re.search(r"dynamic_shared_memory_size %c(\d+)_i32", lowered.text)
    assert launched is not None
    assert inspection.smem().total == int(launched.group(1))


# --- The Tiles tab ---------------------------------------------------------------------


def test_tiles_tab_shows_the_mosaic_part_without_an_error(tma, persistent, manual):
    for inspection in (tma, persistent, manual):
        (kernel,) = tilesdata.payload(inspection)["kernels"]
        assert "error" not in kernel and "mosaicError" not in kernel
        assert kernel["accessesNote"]  # no element-access request, one sentence instead
        assert kernel["merit"]["gpu"]["flops"] == inspection.merit().flops > 0
        assert kernel["merit"]["gpu"]["bytes"] == inspection.plan().gmem_bytes > 0
    (kernel,) = tilesdata.payload(tma)["kernels"]
    mosaic = kernel["mosaic"]
    assert mosaic["smem"]["total"] == 131096
    assert [c["chip"] for c in mosaic["smem"]["chips"]] == ["A100", "H100", "H200", "B200"]
    assert "Hopper" in mosaic["smem"]["chips"][0]["note"]  # A100 cannot run Mosaic GPU
    (pipeline,) = mosaic["pipelines"]
    assert (pipeline["steps"], pipeline["slots"]) == (8, 3)
    assert pipeline["buffers"][0] == {
        "operand": "a_gmem",
        "window": "f16[128,64]",
        "transforms": "TilingTransform((8, 64)), SwizzleTransform(128)",
        "bytesText": "48 KiB",
    }
    assert kernel["grid"] == [2, 2, 8] and kernel["axisNames"] == ["m", "n", "step"]
    assert mosaic["pipelinesMissing"] == ""
    (manual_kernel,) = tilesdata.payload(manual)["kernels"]
    assert manual_kernel["mosaic"]["pipelinesMissing"].startswith("No pipeline")


def test_static_tiles_tab_shows_the_smem_budget_and_pipeline(tma):
    html = static_tab(tma, "tiles")
    assert "131,096 bytes" in html
    line = kernels_line("pipeline-line")
    assert f"emit_pipeline at mosaic_gpu_pipelines.py line {line}:" in html
    assert "TilingTransform((8, 64))" in html


def test_a_kernel_the_walker_cannot_follow_keeps_the_rest_of_the_tab(tma, monkeypatch):
    from pallaslab._src.core import mosaic_gpu

    def refuse(*_args, **_kwargs):
        raise ValueError("an unfamiliar body")

    tilesdata.forget(tma)
    monkeypatch.setattr(mosaic_gpu, "kernel_plan", refuse)
    monkeypatch.setattr(mosaic_gpu, "_plans", type(mosaic_gpu._plans)())
    (kernel,) = tilesdata.payload(tma)["kernels"]
    tilesdata.forget(tma)
    assert "error" not in kernel
    assert kernel["mosaicError"].startswith("pallaslab could not read")
    assert "an unfamiliar body" in kernel["mosaicError"]


def test_walk_counts_are_exact_for_these_kernels(tma, warp_specialized, persistent, manual):
    for inspection in (tma, warp_specialized, persistent, manual):
        plan = inspection.plan()
        assert plan.exact and plan.notices == ()
        assert dataclasses.is_dataclass(plan)


def test_kernels_on_a100_are_refused_in_the_chip_note(tma):
    note = tma.smem().on_chip(hardware.gpu("A100"), tma.plan()).note
    assert note == "Mosaic GPU kernels need Hopper (sm_90) or newer; A100 is sm_80."


def kernels_line(marker: str) -> int:
    """The line of `tests/mosaic_gpu_pipelines.py` carrying `# <marker>`."""
    lines = Path(kernels.__file__).read_text(encoding="utf-8").splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, (marker, found)
    return found[0]


# --- Mismatches of a mesh kernel located on the windows its stores write (pure NumPy) ---


def _windows(starts_rows, lengths_rows, cols=8):
    """Writes of a (rows, cols) output by CTAs: per CTA and step, a window of rows."""
    from pallaslab._src.records.mosaic_gpu import CopyWindows

    starts = np.asarray(starts_rows)
    lengths = np.asarray(lengths_rows)
    return CopyWindows(
        operand=1,
        direction="write",
        sizes=(int(lengths.max()), cols),
        starts=(starts, np.zeros_like(starts)),
        lengths=(lengths, np.where(lengths > 0, cols, 0)),
    )


def test_mismatches_are_counted_per_store_window_and_blamed_on_its_cta():
    from pallaslab._src.geometry import mismatch
    from tests.records import operand

    out = operand((32, 8), (32, 8), (), role="out", position=1, name="o_gmem")
    got, want = np.zeros((32, 8)), np.zeros((32, 8))
    got[20, 3] = 1.0  # in rows 16..23: the window CTA 1 stores first
    errors = mismatch.element_errors(got, want, 1e-6, 1e-6)
    # Two CTAs, two windows of 8 rows each: CTA 0 rows 0..15, CTA 1 rows 16..31.
    windows = _windows([[0, 8], [16, 24]], [[8, 8], [8, 8]])
    found = mismatch.locate_windows(errors, output="[0]", operand=out, windows=windows, grid=(2,))
    assert found is not None
    assert found.tile_shape == (8, 8) and found.counts.tolist() == [[0], [0], [1], [0]]
    assert found.bad_tiles == ((2, 0),) and found.bad_programs == ((1,),)
    assert found.operand == "o_gmem" and found.grid == (2,)


def test_windows_that_do_not_tile_the_output_leave_it_to_the_blocks():
    from pallaslab._src.geometry import mismatch
    from tests.records import operand

    out = operand((32, 8), (32, 8), (), role="out", position=1, name="o_gmem")
    errors = mismatch.element_errors(np.ones((32, 8)), np.zeros((32, 8)), 1e-6, 1e-6)
    ragged = _windows([[0, 8], [16, 24]], [[8, 8], [8, 4]])  # one window is short
    unaligned = _windows([[0, 8], [12, 20]], [[8, 8], [8, 8]])  # one starts mid-tile
    for windows in (ragged, unaligned):
        located = mismatch.locate_windows(
            errors, output="[0]", operand=out, windows=windows, grid=(2,)
        )
        assert located is None
