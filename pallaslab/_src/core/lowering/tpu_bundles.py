"""libtpu's final VLIW bundles, read op by op: which unit each op drives, per source line.

A TPU TensorCore issues one bundle per cycle; a bundle holds up to a dozen ops, each in
a slot of one functional unit. libtpu's `final_bundles` dump writes a bundle per line
(`0x3a LB: > { op ;; op ;; ... }`, one `>` per enclosing loop), each op with its
source location in a `/* loc(...) */` comment when Mosaic was asked to annotate them.
This module splits the bundles into ops, names the unit each op uses (its opcode
says: `vmatpush.bf16.msra.mxu0` is the MXU, `vmax.xlane.f32.xlu1` the cross-lane unit,
`vexp2.f32` the transcendental unit ...) and sums them per source line.

Which issue slot an op takes (`slot_of`) is checked against libtpu's own per-bundle
utilization (`final_hlo-static-per-bundle-utilization`) in the tests: its VALU, VPOP,
VLOAD, VSTORE and SALU columns count issued ops. Its MATMUL, MATPUSH, XLU and EUP
columns are occupancy (a unit busy for several bundles after one op), so the MXU,
XLU and EUP ops are counted here as issued, and their occupancy is the compiler's.
"""

from __future__ import annotations

import dataclasses
import re

from pallaslab._src.core.lowering import sourcemap

# The units reported, in order: what a reader of a TPU kernel asks about.
UNITS = ("MXU", "VPU", "XLU", "EUP", "vld", "vst", "scalar", "sync", "DMA")

_BUNDLE = re.compile(r"^\s*(0x[0-9a-f]+|\d+)\s+([A-Z]{2})?\s*:\s*(>*)\s*\{", re.MULTILINE)
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
# Ops that take no slot: SSA bookkeeping the final listing still shows (`sphi`), the
# kernel's operands, pointer casts and scheduling barriers (as tpuasm, which decodes
# the machine words, also finds: they are not in the program image).
_PSEUDO = ("sphi", "inlined_call_operand", "int_to_ptr", "compiler-scheduling-barrier", "vdelay")
_TRANSCENDENTAL = (
    "vexp",
    "vlog",
    "vrcp",
    "vrsqrt",
    "vsqrt",
    "vtanh",
    "vpow",
    "vsin",
    "vcos",
    "verf",
    "vsigmoid",
)
_MASK_OPS = ("vmor", "vmand", "vmxor", "vmnot", "vmmov")


def unit_of(opcode: str) -> str | None:
    """The unit an op drives (one of `UNITS`), None for ops that take no slot."""
    if opcode.startswith(_PSEUDO):
        return None
    if opcode.startswith(("vmatmul", "vmatpush", "vmatprep", "vmatres", "vdwg", "vlatch")):
        return "MXU"
    if opcode.startswith("vpop"):
        if ".mrf" in opcode or ".mrb" in opcode or ".mxu" in opcode:
            return "MXU"
        if ".erf" in opcode:
            return "EUP"
        return "XLU"  # transpose and cross-lane results (`.trf`, `.xlane`)
    if ".xlu" in opcode or opcode.startswith(("vxpose", "vrot", "vperm", "vbcast")):
        return "XLU"
    if opcode.startswith(_TRANSCENDENTAL):
        return "EUP"
    if opcode.startswith("vld"):
        return "vld"
    if opcode.startswith("vst"):
        return "vst"
    if opcode.startswith(("vsync", "vwait", "dma.done", "sfence", "vfence")):
        return "sync"
    if opcode.startswith("dma."):
        return "DMA"
    if opcode.startswith("v"):
        return "VPU"
    return "scalar"


def slot_of(opcode: str) -> str | None:
    """The issue slot libtpu's per-bundle utilization counts an op in.

    VALU, VPOP, VLOAD (loads, sync-flag waits and mask ops), VSTORE, SALU (scalar ops and
    DMA issue), or "MXU" / "XLU" for ops the utilization counts as occupancy; None for
    ops that take no slot.
    """
    unit = unit_of(opcode)
    if unit is None:
        return None
    if opcode.startswith("vpop"):
        return "VPOP"
    if unit in ("MXU", "XLU"):
        return unit
    if unit in ("vld", "sync") or opcode.startswith(_MASK_OPS):
        return "VLOAD"
    if unit == "vst":
        return "VSTORE"
    if unit in ("scalar", "DMA"):
        return "SALU"
    return "VALU"  # vector arithmetic, transcendentals issued through it included


@dataclasses.dataclass(frozen=True)
class Op:
    """One op of a bundle.

    Attributes:
        opcode: Its opcode ("vadd.f32").
        unit: The unit it drives (None: it takes no slot).
        source: (file, line) it comes from, when annotated.
    """

    opcode: str
    unit: str | None
    source: tuple[str, int] | None


@dataclasses.dataclass(frozen=True)
class Bundle:
    """One VLIW bundle.

    Attributes:
        address: Its address (bundle number).
        depth: Loops around it (the grid's loop is 1).
        ops: Its ops.
    """

    address: int
    depth: int
    ops: tuple[Op, ...]


def opcode_of(op: str) -> str:
    """The opcode of one op's text (`%v1 = vadd.f32 %v2, %v3` -> `vadd.f32`)."""
    head = op.split("[", 1)[0]
    rhs = op.split(" = ", 1)[1] if " = " in head else op
    parts = rhs.split()
    return parts[0] if parts else ""


def parse(final_bundles: str, default_file: str = "") -> tuple[Bundle, ...]:
    """The bundles of a final-bundles listing, in order, each split into its ops."""
    matches = list(_BUNDLE.finditer(final_bundles))
    resolver = sourcemap.LocationResolver()
    found = []
    for k, match in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(final_bundles)
        body = final_bundles[match.end() : end]
        close = _closing_brace(body)
        ops = []
        for text in _split_ops(body[:close]):
            opcode = opcode_of(_COMMENT.sub("", text).strip())
            if not opcode:
                continue
            locations = sourcemap.commented_locations(text, resolver, default_file)
            ops.append(Op(opcode, unit_of(opcode), locations[0] if locations else None))
        address = match.group(1)
        found.append(
            Bundle(
                int(address, 16) if address.startswith("0x") else int(address),
                len(match.group(3)),
                tuple(ops),
            )
        )
    return tuple(found)


def _closing_brace(body: str) -> int:
    """Where a bundle's `{ ... }` closes (comments may hold braces)."""
    depth = 1
    k = 0
    while k < len(body):
        if body.startswith("/*", k):
            end = body.find("*/", k + 2)
            k = len(body) if end < 0 else end + 2
            continue
        if body[k] == "{":
            depth += 1
        elif body[k] == "}":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return len(body)


def _split_ops(body: str) -> list[str]:
    """A bundle's ops: its text split at `;;` outside comments."""
    ops: list[str] = []
    start = 0
    k = 0
    while k < len(body):
        if body.startswith("/*", k):
            end = body.find("*/", k + 2)
            k = len(body) if end < 0 else end + 2
            continue
        if body.startswith(";;", k):
            ops.append(body[start:k])
            start = k = k + 2
            continue
        k += 1
    ops.append(body[start:])
    return [op.strip() for op in ops if op.strip()]


def body_depth(bundles: tuple[Bundle, ...]) -> int:
    """The loop depth of the kernel body: the grid's loop (1), or 0 without loops."""
    return 1 if any(b.depth >= 1 for b in bundles) else 0


def issued(bundles: tuple[Bundle, ...]) -> dict[str, int]:
    """Ops per unit over `bundles`."""
    counts = dict.fromkeys(UNITS, 0)
    for bundle in bundles:
        for op in bundle.ops:
            if op.unit is not None:
                counts[op.unit] += 1
    return counts


def capacities(per_bundle_utilization: str) -> dict[str, int]:
    """Issue slots per bundle of each of libtpu's columns (its `== CAPACTIY:` table)."""
    lines = [line.strip() for line in per_bundle_utilization.splitlines() if line.strip()]
    for k, line in enumerate(lines[:-2]):
        if line.startswith("== CAPAC"):
            names = [name.strip() for name in lines[k + 1].split(",")]
            values = lines[k + 2].split()
            if len(values) == len(names) and all(v.isdigit() for v in values):
                return {name: int(v) for name, v in zip(names, values, strict=True)}
    return {}
