"""Memory that fits, per chip: libtpu's allocation tables and limits, against hand counts.

The oracles: block sizes computed by hand (rows x 1024 float32 x 3 operands x 2
buffers), libtpu itself (a kernel with the suggested `vmem_limit_bytes` compiles where
the default fails, and one byte less does not), and the chips' published figures.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallaslab
from pallaslab._src.core import fit as fit_module
from pallaslab._src.core.lowering import tpu_compile, tpu_memory
from pallaslab._src.records import hardware
from pallaslab._src.records.fit import Allocation, scoped_vmem, space_bytes
from pallaslab._src.records.lowered import GpuResources, Lowered

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu (pallaslab[tpu])"
)
MiB = 1 << 20
ROW = 1024 * 4  # one row of a (rows, 1024) float32 block


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def make_add(rows: int, vmem_limit_bytes: int | None = None):
    """x + y in (rows, 1024) float32 blocks over two programs: 6 blocks of VMEM."""
    params = pltpu.CompilerParams(vmem_limit_bytes=vmem_limit_bytes) if vmem_limit_bytes else None

    def add(x, y):
        return pl.pallas_call(
            add_kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // rows,),
            in_specs=[pl.BlockSpec((rows, 1024), lambda i: (i, 0))] * 2,
            out_specs=pl.BlockSpec((rows, 1024), lambda i: (i, 0)),
            compiler_params=params,
        )(x, y)

    return add


def inspect_add(rows: int, vmem_limit_bytes: int | None = None):
    spec = jax.ShapeDtypeStruct((2 * rows, 1024), jnp.float32)
    return pallaslab.inspect(make_add(rows, vmem_limit_bytes), spec, spec)


# 16 MiB (v5e's default scoped VMEM) / (3 operands x 2 buffers x 4 KiB a row) = 682.7 rows:
# 680 rows (a multiple of 8) need 16,711,680 bytes, 688 rows 16,908,288.
UNDER, OVER = 680, 688
UNDER_BYTES, OVER_BYTES = 3 * 2 * UNDER * ROW, 3 * 2 * OVER * ROW


def test_the_sizes_straddle_the_default_limit():
    assert UNDER_BYTES <= 16 * MiB < OVER_BYTES
    assert hardware.tpu("v5e").default_scoped_vmem == 16 * MiB


# ---------------------------------------------------------------------------
# Reading libtpu's texts (typed here as libtpu 0.0.52 prints them).

LLO = """\
$region0: #{add.1}
  #allocation0 [shape = 'u32[]', space=smem, size = 0x4, offset = 0x4, fixed_abs, tag = 'smem constant byte address 0x4 - core index']
  #allocation1 [shape = 's32[1]{0}', space=sflag, size = 0x4, scoped, tag = 'scoped memory for add.1']
  #allocation2 [shape = 'u32[72,128]{1,0:T(1,128)}', space=vmem, size = 0x9000, scoped, tag = 'internal scratch']
  #allocation3 [shape = 'f32[128,128]{1,0:T(8,128)}', space=vmem, size = 0x10000, scoped, tag = 'scratch operand']
  $region1: #{add.1} parent=0
    #allocation4 [shape = 'u8[65536]{0}', space=vmem, size = 0x10000, scoped, tag = 'input window allocation for operator input 0. The window shape is bf16[128,128], while the full shape is bf16[512,512]. The u8 shape/size shown above represents the raw byte size of this window in VMEM. This allocation has 2 buffering levels.']
    #allocation5 [shape = 's32[2]{0}', space=sflag, size = 0x8, scoped, tag = 'scoped memory for add.1']
    #allocation9 [shape = 'u8[65536]{0}', space=vmem, size = 0x10000, scoped, tag = 'output window allocation for operator output 0. The window shape is bf16[128,128], while the full shape is bf16[512,512]. The u8 shape/size shown above represents the raw byte size of this window in VMEM. This allocation has 2 buffering levels.']
    #allocation13_spill [shape = 'u32[1]{0}', space=smem, size = 0x4, scoped, tag = 'spilled sreg/preg']
"""


def test_the_allocation_table_is_read_by_hand():
    found = tpu_memory.allocations({"original": LLO, "post-ra": LLO})
    assert [a.name for a in found] == [
        "allocation0",
        "allocation1",
        "allocation2",
        "allocation3",
        "allocation4",
        "allocation5",
        "allocation9",
        "allocation13_spill",
    ]
    window = found[4]
    assert (window.role, window.operand, window.shape, window.buffers) == (
        "in",
        0,
        "bf16[128,128]",
        2,
    )
    assert found[6].role == "out" and found[7].role == "spill" and found[2].role == "internal"
    # Scratch + two windows; Mosaic's internal scratch (0x9000) does not count.
    assert scoped_vmem(found) == 0x10000 * 3
    assert space_bytes(found, "vmem") == 0x10000 * 3 + 0x9000
    assert space_bytes(found, "smem") == 4  # the spill; the fixed constant left out


SCOPED_OOM = (
    "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\nRan out of memory in memory space "
    "vmem while allocating on stack for %add.1 = ... Scoped allocation with size 24.00M and "
    "limit 16.00M exceeded scoped vmem limit by 8.00M. It should not be possible"
)
CAPACITY_OOM = (
    "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
    "vmem. Used 48.00M of 16.00M vmem. Exceeded vmem capacity by 32.00M.\n\n"
    "  Largest program allocations in vmem:\n\n  1. Size: 16.00M\n     Operator: op_name=x\n"
    "     Shape: u8[16777216]{0}\n     Unpadded size: 16.00M\n     Tag: input window "
    "allocation for operator input 0.\n"
)


def test_out_of_memory_messages_are_read():
    assert tpu_memory.scoped_oom(SCOPED_OOM) == (24 * MiB, 16 * MiB)
    assert tpu_memory.capacity_oom(CAPACITY_OOM) == (48 * MiB, 16 * MiB)
    assert tpu_memory.largest(CAPACITY_OOM) == (
        (16 * MiB, "input window allocation for operator input 0."),
    )
    assert tpu_memory.scoped_oom("some other error") is None


def test_an_out_of_memory_error_says_what_the_kernel_needs_and_where_from():
    kernel = inspect_add(1024).kernels[0]
    text = tpu_memory.out_of_memory(SCOPED_OOM, kernel, "v5e")
    assert "24 MiB of scoped VMEM" in text and "16 MiB limit" in text
    assert "TPU v5e's default scoped VMEM" in text
    # The blocks that make it up, by hand: 1024 x 1024 float32 = 4 MiB, two buffers each.
    assert "x_ref 8 MiB (float32[1024,1024] x 2)" in text and "o_ref 8 MiB" in text
    assert "vmem_limit_bytes" in text
    assert tpu_memory.out_of_memory("a type error", kernel, "v5e") == ""


# ---------------------------------------------------------------------------
# Real libtpu compiles: the verdict flips at the size computed by hand.


@needs_libtpu
@pytest.mark.slow
def test_the_verdict_flips_at_the_default_scoped_limit_and_the_suggestion_compiles():
    under = inspect_add(UNDER).fit_table(chips=["v5e"]).chip("v5e")
    assert under.verdict == "fits"
    assert under.needed == UNDER_BYTES and under.needed_from == "read"
    assert under.limit == 16 * MiB and under.suggested_limit is None
    # The parts: both inputs and the output, two buffers of 680 x 1024 float32 each.
    counted = [p for p in under.parts if p.counted]
    assert sorted(p.name for p in counted) == ["o_ref", "x_ref", "y_ref"]
    assert all(p.bytes == 2 * UNDER * ROW and p.buffers == 2 for p in counted)
    assert under.estimated == UNDER_BYTES  # the BlockSpecs say the same

    over_inspection = inspect_add(OVER)
    failed = over_inspection.lower("tpu-compile:v5e")
    assert failed.error is not None and "scoped VMEM" in failed.error.message
    assert "16 MiB limit" in failed.error.message
    over = over_inspection.fit_table(chips=["v5e"]).chip("v5e")
    assert over.verdict == "fits-with-limit"
    assert over.suggested_limit == OVER_BYTES and over.needed_from == "read"
    assert f"vmem_limit_bytes={OVER_BYTES:,}" in over.message

    # libtpu agrees: the suggested limit compiles, one byte less does not.
    assert inspect_add(OVER, OVER_BYTES).lower("tpu-compile:v5e").error is None
    short = inspect_add(OVER, OVER_BYTES - 1).lower("tpu-compile:v5e")
    assert short.error is not None and "vmem_limit_bytes" in short.error.message
    frame = over_inspection.fit(chips=["v5e"])
    assert (
        frame.loc[0, "vmem_limit_bytes"] == OVER_BYTES
        and frame.loc[0, "verdict"] == "fits-with-limit"
    )


@needs_libtpu
@pytest.mark.slow
def test_v6e_default_scoped_limit_is_libtpus_32_mib():
    # 40 MiB of blocks: over v6e's default, within its 128 MiB of VMEM.
    rows = 40 * MiB // (6 * ROW)
    fit = inspect_add(rows - rows % 8).fit_table(chips=["v6e"]).chip("v6e")
    error = inspect_add(rows - rows % 8).lower("tpu-compile:v6e").error
    assert error is not None
    scoped = tpu_memory.scoped_oom(error.detail)
    assert scoped is not None and scoped[1] == 32 * MiB == hardware.tpu("v6e").default_scoped_vmem
    assert fit.verdict == "fits-with-limit"


@needs_libtpu
@pytest.mark.slow
def test_a_kernel_over_the_chips_vmem_does_not_fit_there():
    # 3 x 2 x 1536 rows x 4 KiB = 36 MiB: v4 has 16 MiB of VMEM a TensorCore.
    fit = inspect_add(1536).fit_table(chips=["v4"]).chip("v4")
    assert fit.verdict == "does-not-fit"
    assert abs(fit.needed - 36 * MiB) <= tpu_memory.PRINTED_ROUNDING
    assert fit.needed_from == "read, rounded"


# ---------------------------------------------------------------------------
# GPUs: shared memory per block against the published limits.


def _gpu_lowered(shared: int, registers: int = 64, warps: int = 4) -> Lowered:
    resources = GpuResources(
        arch="sm_90",
        num_warps=warps,
        num_stages=3,
        registers_per_thread=registers,
        spill_store_bytes=0,
        spill_load_bytes=0,
        local_bytes=0,
        stack_bytes=0,
        shared_bytes=shared,
    )
    return Lowered("xla-gpu:H100", "add_kernel", 0, "sass", "", "", resources=resources)


@pytest.mark.parametrize(
    ("shared", "registers", "warps", "verdict"),
    [
        (100 * 1024, 64, 4, "fits"),
        (227 * 1024, 64, 4, "fits"),  # the H100's opt-in maximum per block, published
        (228 * 1024, 64, 4, "does-not-fit"),
        (16 * 1024, 255, 16, "does-not-fit"),  # 255 x 512 threads > 65,536 registers
    ],
)
def test_gpu_verdicts_against_the_h100s_published_limits(
    monkeypatch, shared, registers, warps, verdict
):
    inspection = inspect_add(8)
    monkeypatch.setattr(
        fit_module.lowering, "lower", lambda *a, **k: _gpu_lowered(shared, registers, warps)
    )
    row = fit_module.gpu_fit(inspection, inspection.kernels[0], "H100")
    assert row.verdict == verdict
    assert row.limit == 227 * 1024 and row.capacity == 228 * 1024
    assert row.needed == shared and row.registers_per_thread == registers
    if shared > 48 * 1024 and verdict == "fits":
        assert "opts in" in row.message


def test_unknown_chips_are_named():
    with pytest.raises(KeyError, match="v5e"):
        inspect_add(8).fit_table(chips=["v9"])


def test_the_table_frames_one_row_per_chip():
    rows = (
        dataclasses.replace(
            fit_module.MemoryFit(
                "v5e", "tpu-compile:v5e", "tpu", "VMEM", 10, "read", 16 * MiB, "", 128 * MiB, "fits"
            )
        ),
    )
    frame = fit_module.FitTable("k", 0, rows).to_frame()
    assert list(frame["chip"]) == ["v5e"] and frame.loc[0, "needed_bytes"] == 10


def test_allocation_counting_rule():
    internal = Allocation("allocation2", "vmem", 100, role="internal")
    window = Allocation("allocation3", "vmem", 200, role="in", operand=0, buffers=2)
    fixed = Allocation("allocation0", "smem", 4, fixed=True)
    assert scoped_vmem((internal, window, fixed)) == 200
    assert tpu_compile.TOPOLOGIES.keys() >= set(fit_module.TPU_CHIPS)


def _scoped_hints(inspection, chip="v5e"):
    return [h for h in inspection.hints(chip=chip, masks=False) if h.id == "scoped-vmem"]


def test_the_hint_fires_just_over_the_default_and_names_the_value_to_pass():
    assert _scoped_hints(inspect_add(UNDER)) == []
    [hint] = _scoped_hints(inspect_add(OVER))
    assert f"vmem_limit_bytes={OVER_BYTES:,}" in hint.message and "estimated" in hint.message
    assert dict(hint.figures)["scoped VMEM bytes"] == OVER_BYTES
    assert hint.location is not None  # the largest block's BlockSpec line
    # v6e's default (32 MiB) holds it; the kernel's own limit does too.
    assert _scoped_hints(inspect_add(OVER), "v6e") == []
    assert _scoped_hints(inspect_add(OVER, OVER_BYTES)) == []
    # Over the whole VMEM (v4's 16 MiB) it is the working-set hint's (an error), not this one.
    assert _scoped_hints(inspect_add(OVER), "v4") == []


@needs_libtpu
@pytest.mark.slow
def test_the_diff_of_two_chips_puts_fit_and_cost_side_by_side():
    d = pallaslab.diff(inspect_add(UNDER), "tpu-compile:v5e", "tpu-compile:v6e")
    figures = {delta.name: delta for delta in d.deltas}
    assert (figures["VMEM limit"].a, figures["VMEM limit"].b) == (16 * MiB, 32 * MiB)
    assert figures["VMEM needed"].a == figures["VMEM needed"].b == UNDER_BYTES
    assert figures["fit"].a == figures["fit"].b == "fits"
    cycles = figures["static cycles per pass"]
    assert cycles.a and cycles.b  # both sides' bundles, read
    assert "VPU slots filled in the body" in figures
    rows = d.to_frame()
    assert "static cycles per pass" in set(rows["figure"])


def test_the_kernels_tab_estimates_at_once_and_reads_on_request(monkeypatch):
    from pallaslab._src.views.static_page import static_tab
    from pallaslab._src.views.tabs import overview

    inspection = inspect_add(OVER)
    fit = overview.payload(inspection)["kernels"][0]["fit"]
    rows = {row["chip"]: row for row in fit["rows"]}
    assert set(rows) == set(fit_module.CHIPS) and not fit["compiled"]
    # Nothing compiled yet: v5e from the BlockSpecs, over its 16 MiB default.
    v5e = rows["v5e"]
    assert (v5e["neededFrom"], v5e["verdict"], v5e["vmemLimitBytes"]) == (
        "estimated",
        "fits-with-limit",
        OVER_BYTES,
    )
    assert rows["v6e"]["verdict"] == "fits" and rows["v4"]["verdict"] == "does-not-fit"
    assert rows["H100"]["verdict"] == "unknown"
    page = static_tab(inspection, "overview")
    assert "Memory per chip" in page and f"{OVER_BYTES:,}" in page
    # On request every chip is compiled (here: v5e alone), and read.
    monkeypatch.setattr(fit_module, "CHIPS", ("v5e",))
    if importlib.util.find_spec("libtpu") is not None:
        reply = overview.respond(inspection, {"kind": "fit", "kernel": 0})
        assert [row["neededFrom"] for row in reply["rows"]] == ["read"]
        assert reply["compiled"] and reply["rows"][0]["vmemLimitBytes"] == OVER_BYTES


def test_a_row_read_from_compiles_is_looked_up_when_asked_again(monkeypatch):
    inspection = inspect_add(8)
    calls = []

    def lower(*args, **kwargs):
        calls.append(args)
        return _gpu_lowered(64 * 1024)

    monkeypatch.setattr(fit_module.lowering, "lower", lower)
    first = inspection.fit_table(chips=["H100"])
    second = inspection.fit_table(chips=["H100"])
    assert first.rows[0] is second.rows[0] and len(calls) == 1
