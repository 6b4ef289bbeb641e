"""Hint rules on blocks: against the TPU's (8, 128) tiles and the GPU's memory transactions."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pallaslab._src.geometry.hints.inputs import (
    Finding,
    HintInputs,
    grouped,
    is_tpu,
    pipelined_operands,
    shape_text,
)
from pallaslab._src.records import Operand
from pallaslab._src.records.hints import FigureValue, Hint, Severity

# GPU memory moves 32-byte sectors; a warp's loads coalesce best over 128 bytes.
SECTOR_BYTES = 32
LINE_BYTES = 128
# The share of a VMEM tile below which a hint is given.
TPU_WASTE_INFO, TPU_WASTE_WARNING = 0.2, 0.5


def tpu_tiling(inputs: HintInputs) -> list[Hint]:
    """Blocks that break the TPU (8, 128) rule: the kernel will not compile."""
    if not is_tpu(inputs):
        return []
    operands = {o.label: o for o in inputs.kernel.operands}
    findings = []
    for problem in inputs.tiling_problems:
        operand = operands.get(problem.operand)
        figures: list[tuple[str, FigureValue]] = [("tile", "(8, 128)")]
        if operand is not None:
            figures += [
                ("block", shape_text(operand.block_shape)),
                ("array", shape_text(operand.shape)),
            ]
        findings.append(
            Finding(problem.operand, "error", problem.message, "", problem.location, figures)
        )
    if not findings:
        return []
    # The first problem's advice (with its example block) once, after every operand.
    advice = inputs.tiling_problems[0].hint
    return grouped(inputs, "tpu-tiling", [dataclasses.replace(f, advice=advice) for f in findings])


def tpu_padding(inputs: HintInputs) -> list[Hint]:
    """Legal blocks whose VMEM tiles are mostly padding (a narrow last dimension)."""
    if not is_tpu(inputs):
        return []
    broken = {p.operand for p in inputs.tiling_problems}
    operands = {o.label: o for o in inputs.kernel.operands}
    findings = []
    for block in inputs.vmem_blocks:
        if len(block.block_shape) < 2 or not block.bytes or block.operand in broken:
            continue
        used = block.bytes / block.padded_bytes
        waste = 1.0 - used
        if waste < TPU_WASTE_INFO:
            continue
        severity: Severity = "warning" if waste >= TPU_WASTE_WARNING else "info"
        rows = 8 * max(4 // max(np.dtype(block.dtype).itemsize, 1), 1)
        operand = operands.get(block.operand)
        findings.append(
            Finding(
                block.operand,
                severity,
                f"{block.operand}'s block {shape_text(block.block_shape)} of {block.dtype} "
                f"fills {used:.0%} of the VMEM it takes ({waste:.0%} is padding).",
                f"The TPU lays blocks out in tiles of {rows} rows x 128 lanes, so the rest "
                "of that VMEM, and of every vector operation on the block, is padding. Last "
                f"two block dimensions that are multiples of ({rows}, 128) use all of it "
                "(pad or reshape the array if its own dimensions are small).",
                operand.blockspec_location if operand else None,
                [
                    ("block bytes", block.bytes),
                    ("bytes in VMEM tiles", block.padded_bytes),
                    ("padding %", round(100 * waste, 1)),
                ],
            )
        )
    return grouped(inputs, "tpu-padding", findings)


def contiguous_elements(operand: Operand) -> int:
    """Elements of one contiguous run of the block in the array (row-major).

    The block's trailing dimensions that span the whole array are contiguous with
    the next one in: a (64, 128) block of a (256, 128) array is one run of 8192.
    """
    run = 1
    for block, whole in zip(reversed(operand.block_shape), reversed(operand.shape), strict=True):
        size = 1 if block is None else int(block)
        run *= size
        if size != whole:
            break
    return run


def gpu_narrow_rows(inputs: HintInputs) -> list[Hint]:
    """Blocks whose contiguous rows are too short for coalesced GPU loads."""
    if is_tpu(inputs):
        return []
    findings = []
    for operand in pipelined_operands(inputs.kernel):
        if not operand.shape or operand.block_elements >= math.prod(operand.shape):
            continue  # the whole array: one contiguous run
        itemsize = np.dtype(operand.dtype).itemsize
        run = contiguous_elements(operand)
        run_bytes = run * itemsize
        if run_bytes >= LINE_BYTES:
            continue
        severity: Severity = "warning" if run_bytes < SECTOR_BYTES else "info"
        wanted = -(-LINE_BYTES // itemsize)
        last = operand.block_shape[-1]
        if last is not None and last == operand.shape[-1]:
            advice = (
                "Each row of the array is that short: blocks of more rows make each "
                "program's loads span whole cache lines."
            )
        else:
            advice = (
                f"A last block dimension of at least {wanted} elements, or the whole array "
                "dimension, lets each warp load full cache lines."
            )
        findings.append(
            Finding(
                operand.label,
                severity,
                f"{operand.label}'s block {shape_text(operand.block_shape)} of "
                f"{shape_text(operand.shape)} is read in runs of {run_bytes} contiguous "
                f"bytes ({run} x {operand.dtype}).",
                f"GPU memory moves {SECTOR_BYTES}-byte sectors and a warp's loads coalesce "
                f"best over {LINE_BYTES} contiguous bytes. {advice}",
                operand.blockspec_location,
                [
                    ("contiguous bytes", run_bytes),
                    ("sector bytes", SECTOR_BYTES),
                    ("cache line bytes", LINE_BYTES),
                ],
            )
        )
    return grouped(inputs, "gpu-narrow-rows", findings)
