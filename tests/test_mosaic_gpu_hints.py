"""Mosaic GPU hints: each rule on a kernel that triggers it and on one that does not.

Oracles: the figures computed by hand from the kernels' shapes and the chip table
(`hardware.py`: 227 KiB of SMEM per block on H100, 132 SMs, 148 on B200), Mosaic GPU's
own lowering refusing the kernel the SMEM hint calls an error, the rules of
Mosaic GPU's own checks (`wgmma.py`: M a multiple of 64, N of 8 up to 256; the
instruction per architecture), and the source line each hint must point at (marked in
`tests/mosaic_gpu_pipelines.py`).
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import pytest

import pallaslab
from tests import mosaic_gpu_pipelines as kernels


def line_of(marker: str) -> int:
    lines = Path(kernels.__file__).read_text(encoding="utf-8").splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, (marker, found)
    return found[0]


def hints_of(builder, rule: str, chip: str = "H100", **options):
    fn, args = builder(**options)
    return [h for h in pallaslab.hints(fn, *args, chip=chip, masks=False) if h.id == rule]


# --- Shared memory over the chip's budget ---------------------------------------------


def test_smem_over_the_budget_is_an_error_at_the_biggest_buffer():
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-smem", n=512, tile_n=256, steps=6)
    a, b, out = 6 * 128 * 64 * 2, 6 * 64 * 256 * 2, 128 * 256 * 2
    assert hint.severity == "error"
    assert hint.chip == "H100"
    assert hint.figure("SMEM bytes") == a + b + out + 6 * 8
    assert hint.figure("limit bytes") == 227 * 1024
    assert hint.location.line == line_of("pipeline-line")  # the pipeline's buffers
    assert "max_concurrent_steps" in hint.message


def test_smem_over_the_budget_is_what_mosaic_gpus_lowering_refuses():
    """Oracle: Mosaic GPU's own lowering (the `mosaic-gpu` target, on the CPU)."""
    fn, args = kernels.tma_wgmma_matmul(n=512, tile_n=256, steps=6)
    inspection = pallaslab.inspect(fn, *args)
    (hint,) = [h for h in inspection.hints(chip="H100", masks=False) if h.id == "mosaic-smem"]
    refused = inspection.lower("mosaic-gpu").error
    assert refused is not None
    assert f"smem_bytes={hint.figure('SMEM bytes')} > max_smem_bytes={227 * 1024}" in (
        refused.message
    )


def test_smem_that_fits_gives_no_hint():
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-smem") == []


def test_smem_depends_on_the_chip():
    # 5 slots of (128, 64) and (64, 128) plus the (128, 128) epilogue: 192 KiB + barriers.
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-smem", steps=5) == []
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-smem", chip="A100", steps=5)
    assert hint.figure("limit bytes") == 163 * 1024
    assert hint.chip == "A100"


# --- wgmma and tcgen05 the chip rejects -------------------------------------------------


def lowering_error(builder, **options) -> str:
    """Mosaic GPU's own lowering of the kernel (the `mosaic-gpu` target, on the CPU)."""
    fn, args = builder(**options)
    error = pallaslab.inspect(fn, *args).lower("mosaic-gpu").error
    return error.message if error is not None else ""


def test_wgmma_rows_not_a_multiple_of_64():
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-mma", tile_m=32)
    assert hint.severity == "error"
    assert (hint.figure("m"), hint.figure("n"), hint.figure("k")) == (32, 128, 64)
    assert "M = 32 is not a multiple of 64" in hint.message
    assert hint.location.line == line_of("wgmma-line")
    assert "WGMMA requires m and n to be multiples of 64 and 8, got 32" in lowering_error(
        kernels.tma_wgmma_matmul, tile_m=32
    )


def test_wgmma_accumulator_dtype():
    wrong = {"dtype": jnp.bfloat16, "acc_dtype": jnp.float16}
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-mma", **wrong)
    assert "a bfloat16 product accumulates in float32, not float16" in hint.message
    assert "only supports accumulators of type f32" in lowering_error(
        kernels.tma_wgmma_matmul, **wrong
    )
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-mma", acc_dtype=jnp.float16) == []


def test_wgmma_on_blackwell_and_tcgen05_on_hopper():
    (on_b200,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-mma", chip="B200")
    assert "wgmma is a Hopper (sm_90a) instruction and B200 is sm_100" in on_b200.message
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-mma", chip="H200") == []
    (on_h100,) = hints_of(kernels.tcgen05_matmul, "mosaic-mma", chip="H100")
    assert "tcgen05_mma is a Blackwell (sm_100a) instruction" in on_h100.message
    assert on_h100.location.line == line_of("tcgen05-line")
    assert hints_of(kernels.tcgen05_matmul, "mosaic-mma", chip="B200") == []


# --- Swizzles and tilings that do not match the block ----------------------------------


def test_a_narrow_swizzle_on_wide_rows():
    found = hints_of(kernels.tma_wgmma_matmul, "mosaic-swizzle", swizzle=32)
    by_buffer = {h.message.split(" swizzles")[0]: h for h in found}
    a = by_buffer["pipeline buffer of a_gmem"]
    assert a.severity == "warning"
    assert (a.figure("row bytes"), a.figure("swizzle bytes")) == (64 * 2, 32)
    assert "SwizzleTransform(128)" in a.message
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-swizzle") == []


def test_tma_rows_must_be_multiples_of_16_bytes():
    load, store = hints_of(kernels.manual_copies, "mosaic-swizzle", cols=2)
    assert (load.severity, store.severity) == ("error", "error")
    assert load.figure("row bytes") == store.figure("row bytes") == 2 * 4
    assert load.location.line == line_of("manual-load-line")
    assert store.location.line == line_of("manual-store-line")
    assert hints_of(kernels.manual_copies, "mosaic-swizzle", cols=4) == []  # 16 bytes


# --- Pipelines too shallow to hide copies ----------------------------------------------


def test_one_slot_pipeline_hides_nothing():
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-shallow-pipeline", steps=1)
    assert hint.severity == "warning"
    assert (hint.figure("steps"), hint.figure("max_concurrent_steps")) == (512 // 64, 1)
    assert hint.location.line == line_of("pipeline-line")
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-shallow-pipeline") == []


def test_a_single_step_pipeline_alone_on_its_sm():
    # K = 128 in one step: A 32 KiB + B 64 KiB + the epilogue 64 KiB, one CTA per SM.
    shapes = {"k": 128, "tile_k": 128, "tile_n": 256, "n": 512}
    (hint,) = hints_of(kernels.tma_wgmma_matmul, "mosaic-shallow-pipeline", **shapes)
    assert hint.figure("steps") == 1
    assert hint.figure("CTAs per SM") == 228 * 1024 // (160 * 1024 + 1 * 8 + 1024)
    # Half the tile: 96 KiB, two CTAs per SM take turns hiding each other's copies.
    smaller = {**shapes, "tile_n": 128, "n": 256}
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-shallow-pipeline", **smaller) == []


# --- A persistent grid that ignores the SM count ----------------------------------------


def test_persistent_grid_off_the_sm_count():
    (hint,) = hints_of(kernels.persistent_matmul, "mosaic-persistent-grid", num_sms=100)
    assert hint.severity == "warning"
    assert (hint.figure("CTAs"), hint.figure("SMs"), hint.figure("work items")) == (100, 132, 16)
    assert "32 of its 132 SMs stay idle" in hint.message
    assert hint.location.line == line_of("persistent-grid-line")
    assert hints_of(kernels.persistent_matmul, "mosaic-persistent-grid", num_sms=132) == []


def test_persistent_grid_sized_for_another_chip():
    (hint,) = hints_of(kernels.persistent_matmul, "mosaic-persistent-grid", chip="B200")
    assert (hint.figure("CTAs"), hint.figure("SMs")) == (132, 148)
    assert hint.chip == "B200"
    assert (
        hints_of(kernels.persistent_matmul, "mosaic-persistent-grid", chip="B200", num_sms=148)
        == []
    )


def test_a_grid_that_is_not_persistent_is_not_held_to_the_sm_count():
    assert kernels.tma_wgmma_matmul()[0] is not None
    assert hints_of(kernels.tma_wgmma_matmul, "mosaic-persistent-grid", m=1024) == []


@pytest.mark.parametrize(
    "builder",
    [
        kernels.tma_wgmma_matmul,
        kernels.warp_specialized_matmul,
        kernels.persistent_matmul,
        kernels.manual_copies,
        kernels.pallas_call_matmul,
    ],
)
def test_well_formed_kernels_get_no_mosaic_error_on_h100(builder):
    fn, args = builder()
    found = pallaslab.hints(fn, *args, chip="H100", masks=False)
    assert [h.id for h in found if h.id.startswith("mosaic") and h.severity == "error"] == []
