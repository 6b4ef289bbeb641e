"""Performance hints: rules over what pallaslab knows of a kernel. Pure NumPy, no JAX.

Each rule reads records (the kernel, its tile map and figures of merit, the
matrix products and masked accesses the core found, a GPU compile's resources,
the TPU's VMEM layout) against one chip of `hardware.py`, and returns `Hint`s
tied to the source line to change: the BlockSpec's index map, the dot, the
pallas_call. Thresholds are named constants in each rule's module; each message
says what the figures are, why they cost time, and what to change.

Modules: `inputs` (what rules read, how a hint is made, `grouped`: one hint for advice
several operands share), one module per family of rules (`blocks`, `dots`,
`filling`, `memory`, `traffic`, `mosaic_gpu`), `rules` (`RULES`, in order).
"""

from pallaslab._src.geometry.hints.inputs import Finding, HintInputs, grouped
from pallaslab._src.geometry.hints.rules import RULES, kernel_hints

__all__ = ["RULES", "Finding", "HintInputs", "grouped", "kernel_hints"]
