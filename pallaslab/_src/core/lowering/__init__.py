"""The IR explorer's core: every kernel lowered for every target, linked to its source.

`lower(inspection, target, kernel)` lowers one kernel (or the whole program, for
`stablehlo` targets) once and caches it; `targets()` lists what can be asked for.
Modules: `engine` (caching, and dispatch on the target's kind to `targets/`, one
module a kind), `context` (what the targets share), `failures` (errors explained at
the kernel's line), `headers` (what made each lowering), `resources` (GPU registers
and occupancy, TPU VMEM), `sourcemap/` (locations out of compiler texts),
`triton_build` (TTIR to PTX/SASS with the triton package), `tpu_rules` (the (8, 128)
rule and VMEM), `tpu_compile` (libtpu compile-only in a worker process), `xla_gpu`
(XLA's GPU compile in a worker process) and `xla_gpu_lowering` (what it made, as a
`Lowered`), `worker_request` (the workers' request loop), `occupancy` (theoretical
GPU occupancy). Target names live in
`pallaslab._src.records.targets` (no JAX there, so views and the CLI can read them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pallaslab._src.core.lowering.engine import lowerer_for
from pallaslab._src.core.program import program_of, require_program
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.records.targets import Target as Target
from pallaslab._src.records.targets import all_targets as all_targets
from pallaslab._src.records.targets import parse_target as parse_target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Traced


def lower(inspection: Traced, target: str, kernel: str | int = 0) -> Lowered:
    """One kernel of `inspection` (or its program) lowered for `target`, cached.

    Args:
        inspection: The inspection whose program to lower.
        target: A target name (see `targets()`), e.g. "ptx:sm_90".
        kernel: The kernel's name or index (ignored by whole-program targets).

    Raises:
        ValueError: For an unknown target name.
        KeyError: For an unknown kernel.
    """
    parsed = parse_target(target)
    chosen = None
    if not parsed.program:
        if not inspection.kernels:
            raise KeyError(f"{inspection.name} has no Pallas kernels to lower")
        chosen = inspection.kernel(kernel)
    return lowerer_for(require_program(inspection, "lower it")).lower(parsed, chosen)


def lowerings(inspection: Traced) -> list[Lowered]:
    """What was lowered for this inspection so far, latest last."""
    program = program_of(inspection)
    return lowerer_for(program).done() if program is not None else []
