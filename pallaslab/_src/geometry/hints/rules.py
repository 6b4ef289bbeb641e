"""The hint rules in the order they run, and running them over one kernel."""

from __future__ import annotations

from collections.abc import Callable

from pallaslab._src.geometry.hints.blocks import gpu_narrow_rows, tpu_padding, tpu_tiling
from pallaslab._src.geometry.hints.dots import dot_low_precision_sum, dot_upcast, small_dot
from pallaslab._src.geometry.hints.filling import one_stage_pipeline, small_grid, tpu_cores
from pallaslab._src.geometry.hints.inputs import HintInputs
from pallaslab._src.geometry.hints.memory import occupancy, scoped_vmem, spills, working_set
from pallaslab._src.geometry.hints.mosaic_gpu import (
    mma_rejected,
    persistent_grid,
    shallow_pipeline,
    smem_over_budget,
    swizzle_mismatch,
)
from pallaslab._src.geometry.hints.traffic import masked_lanes, revisits
from pallaslab._src.records.hints import SEVERITIES, Hint

RULES: tuple[Callable[[HintInputs], list[Hint]], ...] = (
    tpu_tiling,
    working_set,
    smem_over_budget,
    mma_rejected,
    swizzle_mismatch,
    scoped_vmem,
    occupancy,
    small_grid,
    tpu_cores,
    one_stage_pipeline,
    small_dot,
    dot_upcast,
    dot_low_precision_sum,
    tpu_padding,
    gpu_narrow_rows,
    masked_lanes,
    revisits,
    spills,
    shallow_pipeline,
    persistent_grid,
)


def kernel_hints(inputs: HintInputs) -> list[Hint]:
    """Every rule's hints for one kernel, most severe first."""
    found: list[Hint] = []
    for rule in RULES:
        found += rule(inputs)
    rank = {s: k for k, s in enumerate(SEVERITIES)}
    return sorted(found, key=lambda h: rank[h.severity])
