"""Finding Pallas kernels in a traced program and converting them to records.

`sites` finds them (and what they are bound to), `convert` makes `Kernel` records of
them, `locations` says where in the user's source they are, `jaxprs` prints their
jaxprs with a source map.
"""

from pallaslab._src.core.jax_adapter.kernels.convert import (
    kernel_from_site,
    kernel_parameter_names,
    mesh_kernel_kind,
    mesh_kernel_summary,
    site_backend,
)
from pallaslab._src.core.jax_adapter.kernels.jaxprs import jaxpr_constants, jaxpr_text
from pallaslab._src.core.jax_adapter.kernels.locations import user_location
from pallaslab._src.core.jax_adapter.kernels.sites import (
    KernelSite,
    find_kernel_sites,
    kernel_operand_positions,
    mesh_backend,
    mesh_of,
    primitives_outside_kernels,
    program_inputs_of,
)

__all__ = [
    "KernelSite",
    "find_kernel_sites",
    "jaxpr_constants",
    "jaxpr_text",
    "kernel_from_site",
    "kernel_operand_positions",
    "kernel_parameter_names",
    "mesh_backend",
    "mesh_kernel_kind",
    "mesh_kernel_summary",
    "mesh_of",
    "primitives_outside_kernels",
    "program_inputs_of",
    "site_backend",
    "user_location",
]
