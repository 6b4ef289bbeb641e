"""The one place pallaslab reads JAX internals (`jax._src`).

Everything read here is converted at once into pallaslab's own records
(`pallaslab._src.records`), so no other module depends on the shape of a private JAX
object. Features are probed, not versions checked: when an internal moves, the feature
that needs it degrades with a clear notice (`feature_notice`), and
`tests/test_jax_adapter.py` pins every private shape read here.

Modules: `probes` (guarded imports), `kernels` (finding kernels, records, jaxpr text),
`indexmaps` (index maps to NumPy expressions), `execution` (interpret mode on CPU,
recording kernels as they are bound, prefetch values), `errors` (context for messages),
`emulation` (a pallas_call's body, blocks and padding, for the emulator).
"""

from pallaslab._src.core.jax_adapter.errors import KernelCallContext as KernelCallContext
from pallaslab._src.core.jax_adapter.errors import block_spec_location as block_spec_location
from pallaslab._src.core.jax_adapter.errors import kernel_call_context as kernel_call_context
from pallaslab._src.core.jax_adapter.execution import auto_interpret as auto_interpret
from pallaslab._src.core.jax_adapter.execution import forced_interpret as forced_interpret
from pallaslab._src.core.jax_adapter.execution import (
    install_cpu_interpret as install_cpu_interpret,
)
from pallaslab._src.core.jax_adapter.execution import (
    install_platform_rule as install_platform_rule,
)
from pallaslab._src.core.jax_adapter.execution import kernel_operands as kernel_operands
from pallaslab._src.core.jax_adapter.execution import prefetch_values as prefetch_values
from pallaslab._src.core.jax_adapter.execution import recording_kernels as recording_kernels
from pallaslab._src.core.jax_adapter.execution import same_kernel as same_kernel
from pallaslab._src.core.jax_adapter.execution import set_emulator as set_emulator
from pallaslab._src.core.jax_adapter.execution import site_function as site_function
from pallaslab._src.core.jax_adapter.indexmaps import (
    index_map_from_jaxpr as index_map_from_jaxpr,
)
from pallaslab._src.core.jax_adapter.kernels import KernelSite as KernelSite
from pallaslab._src.core.jax_adapter.kernels import find_kernel_sites as find_kernel_sites
from pallaslab._src.core.jax_adapter.kernels import jaxpr_text as jaxpr_text
from pallaslab._src.core.jax_adapter.kernels import kernel_from_site as kernel_from_site
from pallaslab._src.core.jax_adapter.probes import feature_notice as feature_notice
