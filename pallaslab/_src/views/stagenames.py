"""What each text of a lowering is, in words: the IR tab's legend for its stage picker.

A lowering's main text is "final" in the picker (what the target produces: SASS for
`xla-gpu`, the VLIW bundles for `tpu-compile`); its stages are the compiler's texts
on the way there (a pass of Mosaic's pipeline, the PTX, ptxas' report, XLA's HLO).
The names come from the lowering (`records.Stage.name`); these are their meanings.
"""

from __future__ import annotations

import re

from pallaslab._src.records import targets

# Mosaic GPU's pipeline as pallaslab names it: "Mosaic GPU 07 after convert-vector-to-scf".
_MOSAIC_GPU_PASS = re.compile(r"^Mosaic GPU (\d+) after (.+)$")
# Mosaic TPU's pipeline as libtpu dumps it: "post-apply-vector-layout", "pre-...".
_MOSAIC_TPU_PASS = re.compile(r"^(post|pre)-(.+)$")

_FIXED = {
    "original": "The kernel's Mosaic module as Pallas emitted it, before any pass.",
    "ptx": "PTX, the virtual instruction set ptxas compiled into the SASS.",
    "ptxas": "ptxas' report: registers, spills and shared memory of each kernel function.",
    "hlo (program)": "XLA's optimised HLO of the whole program around the kernel.",
    "launches (program)": "The kernels XLA launches for the whole program, in order.",
    "hlo (kernel alone)": "XLA's HLO of the kernel compiled alone.",
    "LLO (original)": "libtpu's low-level operations (LLO) before they are scheduled.",
    "schedule analysis": "libtpu's analysis of the final schedule: bundles per loop.",
    "per-bundle utilization": "How many slots of each unit every bundle uses.",
    "compiled HLO": "The HLO libtpu compiled around the kernel.",
}


def final_title(target: str) -> str:
    """What the main text of a lowering for `target` is ("final" in the stage picker)."""
    try:
        found = targets.parse_target(target)
    except ValueError:
        return "The target's own text."
    if found.kind == "xla-gpu":
        return (
            f"The SASS XLA compiled for the {found.arch}: the machine code that runs, "
            "after every stage below."
        )
    if found.kind == "tpu-compile":
        return (
            f"The VLIW bundles libtpu compiled for TPU {found.arch}: the machine code "
            "that runs, after every stage below."
        )
    return f"{found.title}: the target's own text, after every stage below."


def stage_title(name: str) -> str:
    """What the stage called `name` is, in one sentence."""
    if name in _FIXED:
        return _FIXED[name]
    if match := _MOSAIC_GPU_PASS.match(name):
        number, step = match.groups()
        return f"Mosaic GPU's module after pass {int(number)} of its pipeline, {step}."
    if name.startswith("Mosaic GPU ") and name.endswith("original"):
        return "Mosaic GPU's module as Pallas emitted it, before any pass."
    if match := _MOSAIC_TPU_PASS.match(name):
        when, step = match.groups()
        return f"Mosaic TPU's module {'after' if when == 'post' else 'before'} its pass {step}."
    return f"An intermediate text of the compile: {name}."
