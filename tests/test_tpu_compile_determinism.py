"""`tpu-compile` gives the same figures every time: the kernel's own program, never a copy's.

libtpu dumps the LLO of every program it compiles, named `<timestamp>-<program>-
<NN>-<stage>.txt`. Where XLA puts layout copies around the kernel (a head dimension
of 64 in bf16 makes three), each copy is a program with its own final bundles; the
kernel's are those of the HLO's Mosaic custom call. Picking whichever program's dump
sorts last (by its timestamp: when libtpu got to it) gave the kernel's bundles on one
run and a copy's on the next.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pallaslab._src.core.lowering import tpu_compile, tpu_worker

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu (pallaslab[tpu])"
)

# A loop nest of one level: 3 bundles, 2 inside the loop.
KERNEL_BUNDLES = """\
  0x0   :  { %s0 = smov 0 }
  0x1   : > { %v1 = vld [vmem:[%s0]] }
  0x2   : > { %v2 = vadd.f32 %v1, %v1 }
"""
# A copy: 5 bundles, no loop.
COPY_BUNDLES = "".join(
    f"  0x{k:x}   :  {{ %v{k} = vld [vmem:[#allocation0]] }}\n" for k in range(5)
)

COMPILED_HLO = """\
ENTRY %main.2 (args_0_.3: bf16[2,4,1024,64]) -> bf16[2,4,1024,64] {
  %copy.1 = bf16[2,4,1024,64]{3,2,1,0} copy(%args_0_.3), metadata={op_name="args[0]"}
  %run_kernel.1 = bf16[2,4,1024,64]{3,2,1,0} custom-call(%copy.1), custom_call_target="tpu_custom_call", backend_config={}
  ROOT %copy.4 = bf16[2,4,1024,64]{2,3,1,0} copy(%run_kernel.1)
}
"""


def _dump(directory: Path, stamp: int, program: str, index: int, stage: str, text: str) -> None:
    (directory / f"{stamp}-{program}-{index:02d}-{stage}.txt").write_text(text, encoding="utf-8")


def test_the_kernels_program_is_chosen_whatever_finished_last(tmp_path):
    # The copy after the kernel finished last: its dumps sort last.
    _dump(tmp_path, 100, "TLP", 73, "final_bundles", "runtime")
    _dump(tmp_path, 100, "<late-finalization>", 71, "final_bundles", "runtime")
    _dump(tmp_path, 200, "copy.1", 66, "final_bundles", COPY_BUNDLES)
    _dump(tmp_path, 300, "run_kernel.1", 2, "original", "kernel llo")
    _dump(tmp_path, 300, "run_kernel.1", 7, "post-simplifier-1", "simplified")
    _dump(tmp_path, 300, "run_kernel.1", 71, "final_bundles", KERNEL_BUNDLES)
    _dump(tmp_path, 400, "copy.4", 65, "schedule-analysis_final_bundles", "copy analysis")
    _dump(tmp_path, 400, "copy.4", 66, "final_bundles", COPY_BUNDLES)

    programs = tpu_worker.llo_programs(tmp_path)
    assert sorted(programs) == ["copy.1", "copy.4", "run_kernel.1"]  # no runtime programs
    # Stage names keep their own numbers ("post-simplifier-1").
    assert sorted(programs["run_kernel.1"]) == ["final_bundles", "original", "post-simplifier-1"]
    program, llo, others = tpu_worker.split_programs(programs, COMPILED_HLO)
    assert program == "run_kernel.1"
    assert llo["final_bundles"] == KERNEL_BUNDLES
    assert tpu_compile.bundle_counts(llo["final_bundles"]) == (3, 2)
    assert sorted(others) == ["copy.1", "copy.4"]


def test_without_a_kernel_in_the_hlo_the_largest_program_stands_for_it(tmp_path):
    _dump(tmp_path, 300, "fusion.7", 71, "final_bundles", COPY_BUNDLES)
    _dump(tmp_path, 100, "small.2", 66, "final_bundles", KERNEL_BUNDLES)
    program, llo, others = tpu_worker.split_programs(tpu_worker.llo_programs(tmp_path), "")
    assert program == "fusion.7"
    assert list(others) == ["small.2"]
    assert llo["final_bundles"] == COPY_BUNDLES


def test_the_mosaic_pipeline_is_the_longest_run_in_order(tmp_path):
    for run, count in ((5, 1), (3, 3), (9, 1)):
        for index in range(count):
            name = f"{run}-{index:04d}-mosaic-dump-anonymous-stage{index}.txt"
            (tmp_path / name).write_text(f"{run}:{index}", encoding="utf-8")
    stages = tpu_worker._mosaic_stages(tmp_path)
    assert [text for _, text in stages] == ["3:0", "3:1", "3:2"]


# Compiled in a fresh process each time: nothing cached is shared between the two.
_COMPILE_ONCE = textwrap.dedent(
    """
    import json, jax, jax.numpy as jnp, pallaslab
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    qkv = jax.ShapeDtypeStruct((1, 2, 512, 64), jnp.bfloat16)
    inspection = pallaslab.inspect(
        lambda q, k, v: fa.flash_attention(q, k, v, causal=True), qkv, qkv, qkv
    )
    lowered = inspection.lower("tpu-compile:v5e")
    kernel = inspection.kernels[0]
    print(json.dumps({
        "error": str(lowered.error) if lowered.error else "",
        "header": lowered.header,
        "bundles": lowered.resources.bundles,
        "loop": lowered.resources.loop_body_bundles,
        "files": sorted({f for _, f, _ in lowered.source_map}),
        "kernel_file": kernel.source.file,
        "stages": [s.name for s in lowered.stages],
    }))
    """
)


def _compile_in_a_fresh_process() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_ONCE],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_libtpu
def test_causal_flash_attention_compiles_to_the_same_bundles_twice():
    first, second = _compile_in_a_fresh_process(), _compile_in_a_fresh_process()
    assert first["error"] == ""
    assert (first["bundles"], first["loop"]) == (second["bundles"], second["loop"])
    assert first["header"] == second["header"]
    # The bundles are the kernel's: every one annotated with a line is a kernel line.
    assert first["files"] == [first["kernel_file"]]
    assert first["loop"] is not None and 0 < first["loop"] < first["bundles"]
    # XLA's layout copies around the kernel are shown apart, as their own programs.
    assert any(s.startswith("XLA copy") for s in first["stages"])
