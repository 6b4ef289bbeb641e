"""What a libtpu compile allocates: the LLO allocation table, and its out-of-memory messages.

libtpu's LLO dumps open each region with its allocations, one a line:

    #allocation3 [shape = 'u8[4194304]{0}', space=vmem, size = 0x400000, scoped,
                  tag = 'input window allocation for operator input 0. ... This
                  allocation has 2 buffering levels.']

(space: `vmem`, `smem`, `sflag` for DMA and sync flags; `scoped` allocations live for
the kernel; tags say what each holds). A kernel whose scoped VMEM exceeds its limit
fails with "Scoped allocation with size 24.00M and limit 16.00M exceeded scoped vmem
limit by 8.00M" (sizes in MiB, two decimals), and one over the chip's VMEM with "Used
48.00M of 16.00M vmem" and its largest allocations. Text only: no JAX.
"""

from __future__ import annotations

import re

from pallaslab._src.base import words
from pallaslab._src.core.lowering import tpu_rules
from pallaslab._src.records import Kernel, hardware
from pallaslab._src.records.fit import Allocation

_ALLOCATION = re.compile(
    r"#(allocation\d+\w*) \[shape = '([^']*)', space=(\w+), size = (0x[0-9a-fA-F]+|\d+)"
    r"(?:, offset = [^,\]]+)?((?:, \w+)*), tag = '([^']*)'\]"
)
_WINDOW = re.compile(
    r"(input|output) window allocation for operator (?:input|output) (\d+)\. "
    r"The window shape is (\S+?\]), while"
)
_BUFFERING = re.compile(r"has (\d+) buffering level")
_SIZE = r"([\d.]+)([KMG]?)"
_SCOPED_OOM = re.compile(
    rf"Scoped allocation with size {_SIZE} and limit {_SIZE} exceeded scoped vmem limit"
)
_CAPACITY_OOM = re.compile(
    rf"Ran out of memory in memory space vmem\. Used {_SIZE} of {_SIZE} vmem"
)
_LARGEST = re.compile(rf"Size: {_SIZE}\n(?:.*\n)*?\s*Tag: ([^\n]*)")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# libtpu prints sizes in MiB with two decimals: a printed figure is off by up to this.
PRINTED_ROUNDING = (1 << 20) // 200


def allocations(llo: dict[str, str]) -> tuple[Allocation, ...]:
    """Every allocation the LLO dumps of one compile declare, each once, by name.

    Later stages add the register allocator's spills: all stages are read and each
    allocation kept once (the same name is the same allocation).
    """
    found: dict[str, Allocation] = {}
    for text in llo.values():
        if "#allocation" not in text:
            continue
        for match in _ALLOCATION.finditer(text):
            name = match.group(1)
            if name in found:
                continue
            flags = {f.strip() for f in match.group(5).split(",") if f.strip()}
            found[name] = _allocation(
                name,
                match.group(2),
                match.group(3),
                int(match.group(4), 0),
                scoped="scoped" in flags,
                fixed="fixed_abs" in flags,
                tag=match.group(6),
            )
    return tuple(sorted(found.values(), key=lambda a: _number(a.name)))


def _number(name: str) -> int:
    digits = re.match(r"allocation(\d+)", name)
    return int(digits.group(1)) if digits else 0


def _allocation(
    name: str, shape: str, space: str, size: int, *, scoped: bool, fixed: bool, tag: str
) -> Allocation:
    window = _WINDOW.search(tag)
    buffering = _BUFFERING.search(tag)
    if window:
        role = "in" if window.group(1) == "input" else "out"
        return Allocation(
            name,
            space,
            size,
            scoped=scoped,
            fixed=fixed,
            role=role,
            operand=int(window.group(2)),
            shape=window.group(3),
            buffers=int(buffering.group(1)) if buffering else 1,
            tag=tag,
        )
    lowered_tag = tag.lower()
    if space == "sflag":
        role = "semaphore"
    elif "internal scratch" in lowered_tag:
        role = "internal"
    elif "spill" in lowered_tag:
        role = "spill"
    elif "scratch operand" in lowered_tag:
        role = "scratch"
    else:
        role = "other"
    return Allocation(
        name, space, size, scoped=scoped, fixed=fixed, role=role, shape=shape, tag=tag
    )


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


def scoped_oom(message: str) -> tuple[int, int] | None:
    """(needed, limit) bytes of a scoped-VMEM out-of-memory error, rounded as printed."""
    match = _SCOPED_OOM.search(message)
    if match is None:
        return None
    return _bytes(match.group(1), match.group(2)), _bytes(match.group(3), match.group(4))


def capacity_oom(message: str) -> tuple[int, int] | None:
    """(used, capacity) bytes of an error for VMEM beyond the chip's, rounded as printed."""
    match = _CAPACITY_OOM.search(message)
    if match is None:
        return None
    return _bytes(match.group(1), match.group(2)), _bytes(match.group(3), match.group(4))


def largest(message: str) -> tuple[tuple[int, str], ...]:
    """(bytes, tag) of the largest allocations an out-of-memory error lists."""
    return tuple((_bytes(m.group(1), m.group(2)), m.group(3)) for m in _LARGEST.finditer(message))


def out_of_memory(message: str, kernel: Kernel, chip: str) -> str:
    """A libtpu out-of-VMEM error in the kernel's terms ("" for any other error).

    How much the compile needed (its figure, rounded as it prints it), against which
    limit, and which blocks, buffers and scratch make it up (from the BlockSpecs).
    """
    scoped = scoped_oom(message)
    over = capacity_oom(message)
    if scoped is None and over is None:
        return ""
    blocks = tpu_rules.vmem_blocks(kernel)
    parts = words.and_list(
        [
            f"{b.operand} {words.nbytes(b.padded_bytes)} ({b.dtype}"
            f"[{','.join(map(str, b.block_shape))}] x {b.buffers})"
            for b in sorted(blocks, key=lambda b: -b.padded_bytes)
        ]
    )
    made_of = (
        f" Its blocks and scratch (BlockSpecs x buffers, estimated): {parts}." if parts else ""
    )
    tpu = hardware.tpu(chip)
    if scoped is not None:
        needed, limit = scoped
        whose = (
            f"TPU {chip}'s default scoped VMEM"
            if limit == tpu.default_scoped_vmem
            else "the kernel's vmem_limit_bytes"
        )
        return (
            f"it needs {words.nbytes(needed)} of scoped VMEM (libtpu's figure), over the "
            f"{words.nbytes(limit)} limit ({whose}).{made_of} Pass "
            "pltpu.CompilerParams(vmem_limit_bytes=N) with N at least that (inspection.fit() "
            f"reads the exact N), up to the {words.nbytes(tpu.vmem_per_core)} of VMEM, or "
            "make the blocks smaller."
        )
    assert over is not None
    return (
        f"it needs {words.nbytes(over[0])} of VMEM (libtpu's figure), more than the "
        f"{words.nbytes(over[1])} a TPU {chip} TensorCore has.{made_of} Make the blocks "
        "smaller."
    )
