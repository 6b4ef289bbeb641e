"""The GPU-side pieces of scripts/device-check, run on a CPU as far as they go.

The table and the race check run here at small sizes with the kernels emulated; the
resource comparison's two readers (ncu's CSV, ptxas' log) are fed what those tools
print; the prediction side compiles with the triton package where it is installed.
"""

from __future__ import annotations

import importlib.util

import jax
import pytest

from benchmarks import gpu_races, gpu_resources, gpu_table
from pallaslab._src.bench import harness


def test_the_table_measures_every_kernel_against_xla_and_formats():
    cases = list(
        gpu_table.cases(sizes=[128], attention_seqs=[128], attention_heads=2, attention_dim=64)
    )
    families = [c.family for c in cases]
    assert families == ["matmul", "matmul+gelu", "flash attention", "Mosaic GPU matmul"]
    mosaic = cases[-1]
    assert mosaic.pallas is None and "Hopper" in mosaic.skip
    assert cases[0].flops == 2 * 128**3 and cases[2].flops == 4 * 2 * 128 * 128 * 64
    rows = gpu_table.run(cases, harness.QUICK)
    by_key = {(r.family, r.impl): r for r in rows}
    for family in ("matmul", "matmul+gelu", "flash attention"):
        pallas, xla = by_key[(family, "pallas")], by_key[(family, "xla")]
        assert pallas.error == "" and xla.error == "", (pallas, xla)
        assert pallas.median_ms > 0 and xla.median_ms > 0
        assert pallas.correct is True, family  # against XLA's result on the same inputs
        assert pallas.pct_of_peak is None  # a CPU: no peak to compare with
    assert by_key[("Mosaic GPU matmul", "pallas")].error == mosaic.skip
    text = gpu_table.format_table(rows, *gpu_table.describe_device())
    assert text.startswith(f"GPU table on {harness.device_name()} (jax {jax.__version__}")
    assert "| matmul | 128 |" in text and "| flash attention | 2x128x64 |" in text
    assert "not representative" in text  # the CPU label
    assert "note: Mosaic GPU matmul 128 (pallas): needs a Hopper GPU" in text


def test_a_case_that_fails_spoils_only_its_own_row():
    def broken(a, b):
        raise ValueError("no such kernel\nsecond line")

    case = gpu_table.Case(
        "broken",
        "8",
        broken,
        jax.jit(gpu_table._matmul_xla),
        gpu_table._square_inputs(8, "float32"),
        1.0,
    )
    xla, pallas = gpu_table.measure(case, harness.QUICK)
    assert xla.error == "" and xla.median_ms > 0
    assert pallas.error == "ValueError: no such kernel" and pallas.median_ms is None


def test_races_are_predicted_and_shown_by_the_emulators_gpu_orders():
    notebook_case, big = gpu_races.cases(n=256, block=64)
    observations = gpu_races.observe(notebook_case, runs=2)
    grid_order, *gpu_orders = observations
    assert grid_order.predicted_gpu > 0 and grid_order.predicted_tpu == 0
    assert grid_order.how == "CPU emulator, grid order" and grid_order.wrong == 0
    assert gpu_orders and any(o.wrong for o in gpu_orders)
    text = gpu_races.format_observations(observations, "cpu")
    assert "predicted race seen" in text and "| notebook 08 matmul" in text
    assert big.shapes == ((256, 256), (256, 256))


def test_the_notebook_kernel_is_the_notebooks_own():
    matmul = gpu_races.notebook_kernel()
    kernel = gpu_races.pallaslab.inspect(
        matmul, *(jax.ShapeDtypeStruct((128, 128), "float32"),) * 2
    ).kernels[0]
    assert kernel.grid == (2, 2, 2) and kernel.name == "matmul_kernel"


NCU_DETAILS = """==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "_matmul_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Launch Statistics","Block Size","","256"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","168"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Launch Statistics","Dynamic Shared Memory Per Block","byte","49,152"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Launch Statistics","Static Shared Memory Per Block","byte","0"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Occupancy","Block Limit Registers","block","1"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Occupancy","Block Limit Shared Mem","block","4"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Occupancy","Block Limit Warps","block","8"
"0","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Occupancy","Theoretical Occupancy","%","12.5"
"1","4242","python3","127.0.0.1","_matmul_kernel","1","13","(256, 1, 1)","(32, 32, 1)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","99"
"""

NCU_RAW = """"Kernel Name","launch__registers_per_thread","launch__shared_mem_per_block_dynamic","launch__shared_mem_per_block_static","sm__maximum_warps_per_active_cycle_pct"
"","register/thread","byte","byte","%"
"flash_kernel","128","32768","0","25"
"""


def test_ncu_csv_is_read_in_both_page_layouts():
    details = gpu_resources.parse_ncu_csv(NCU_DETAILS)
    assert details["registers"] == 168  # the first kernel profiled, not the second
    assert details["dynamic_shared"] == 49152 and details["static_shared"] == 0
    assert details["occupancy_pct"] == 12.5 and details["limit_registers"] == 1
    raw = gpu_resources.parse_ncu_csv(NCU_RAW)
    assert raw == {
        "registers": 128,
        "dynamic_shared": 32768,
        "static_shared": 0,
        "occupancy_pct": 25,
    }
    assert gpu_resources.parse_ncu_csv("==PROF== No kernels were profiled.") == {}


def test_the_ptxas_log_of_one_entry_is_read():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'fusion_1' for 'sm_90a'\n"
        "ptxas info    : Used 32 registers, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Compiling entry function '_matmul_kernel' for 'sm_90a'\n"
        "ptxas info    : Function properties for _matmul_kernel\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 168 registers\n"
    )
    entry = gpu_resources._entry_log(log, "matmul_kernel")
    figures = gpu_resources.triton_build.ptxas_figures(entry)
    assert figures["registers"] == 168 and figures["spill_stores"] == 4


def test_the_resource_table_pairs_prediction_and_device():
    text = gpu_resources.format_resources(
        [
            (
                "seed matmul",
                {"registers": 154, "shared_bytes": 49152, "blocks_per_sm": 1, "occupancy_pct": 12.5,
                 "limiter": "registers", "triton": "3.6.0"},
                {"source": "ncu", "registers": 168, "shared_bytes": 49152, "blocks_per_sm": 1,
                 "occupancy_pct": 12.5, "limiter": "registers"},
            ),
            ("flash attention", {"error": "no triton"}, {"error": "neither ncu nor ptxas found"}),
        ],
        "NVIDIA H100 80GB HBM3",
        "sm_90",
    )  # fmt: skip
    assert "| seed matmul | 154 \\| 168 | 49152 \\| 49152 |" in text
    assert "note: flash attention (device): neither ncu nor ptxas found" in text
    assert "triton 3.6.0" in text


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_predicted_resources_come_from_the_ptx_target():
    (seed, *_) = gpu_resources.cases(matmul_n=256)
    found = gpu_resources.predicted(seed, "sm_90", "H100")
    assert "error" not in found, found
    assert found["registers"] > 0 and found["shared_bytes"] > 0 and found["threads"] == 256
    assert found["blocks_per_sm"] >= 1 and found["limiter"]


@pytest.mark.gpu
def test_the_table_on_the_gpu_is_right_and_below_the_peak():
    previous = jax.config.jax_pallas_use_mosaic_gpu
    jax.config.update("jax_pallas_use_mosaic_gpu", False)  # the course's kernels: Triton
    try:
        rows = gpu_table.run(gpu_table.cases(sizes=[2048], attention_seqs=[1024]))
    finally:
        jax.config.update("jax_pallas_use_mosaic_gpu", previous)
    # Only JAX's Hopper matmul may be skipped, and only off a Hopper GPU (probed).
    hopper_skip = gpu_table.hopper_skip()
    for row in rows:
        if hopper_skip and row.family == "Mosaic GPU matmul" and row.impl == "pallas":
            assert row.skipped and row.error == hopper_skip, row
        else:
            assert not row.skipped and row.error == "", row
        if row.impl == "pallas" and not row.skipped:
            assert row.correct, row
        if row.pct_of_peak is not None:
            assert 0 < row.pct_of_peak < 110, row
