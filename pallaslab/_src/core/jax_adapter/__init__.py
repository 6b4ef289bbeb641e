"""The one place pallaslab reads JAX internals (`jax._src`).

Everything read here is converted at once into pallaslab's own records
(`pallaslab._src.records`), so no other module depends on the shape of a private JAX
object. Features are probed, not versions checked: when an internal moves, the feature
that needs it degrades with a clear notice (`feature_notice`), and
`tests/test_jax_adapter.py` pins every private shape read here.

Modules: `probes` (guarded imports), `kernels` (finding kernels, records, jaxpr text),
`indexmaps` (index maps to NumPy expressions), `execution` (interpret mode on CPU,
recording kernels as they are bound, prefetch values), `errors` (context for messages),
`accesses` (a kernel body interpreted for one program, recording each element it
touches), `work` (arithmetic counted from a body), `dots` (a body's matrix
products), `outputs` (which kernel writes each
program output), `gpu_timing` (kernel times on GPU).
`lowering` (lowering one kernel for GPU/TPU, reading the kernel out of the module).
`gpu_export` (a kernel or program exported for CUDA as lowered for one GPU chip).
`emulation` (a pallas_call's body, blocks and padding, for the emulator).
`chips` (the TPU chip Pallas' lookups answer for, while tracing and lowering).
`gpu_chips` (the GPU the device queries of GPU kernels answer for).
`shapes` (private shapes that moved between JAX versions, read one way).
`fingerprint` (a traced program as a hashable key, for the compile cache).
`mosaic_gpu` (what a Mosaic GPU kernel allocates, copies and multiplies, per CTA).
`replay` (a traced program replayed from its jaxpr: the inspection's snapshot).
`observe` (every kernel lowered, told to an observer: `pytest --pallaslab`).
"""

from pallaslab._src.core.jax_adapter.accesses import Recorded as Recorded
from pallaslab._src.core.jax_adapter.accesses import body_ref_shapes as body_ref_shapes
from pallaslab._src.core.jax_adapter.accesses import interpret_program as interpret_program
from pallaslab._src.core.jax_adapter.chips import asks_for_a_tpu as asks_for_a_tpu
from pallaslab._src.core.jax_adapter.dots import kernel_dots as kernel_dots
from pallaslab._src.core.jax_adapter.errors import BlockSpecContext as BlockSpecContext
from pallaslab._src.core.jax_adapter.errors import KernelCallContext as KernelCallContext
from pallaslab._src.core.jax_adapter.errors import PallasCallContext as PallasCallContext
from pallaslab._src.core.jax_adapter.errors import block_spec_context as block_spec_context
from pallaslab._src.core.jax_adapter.errors import block_spec_location as block_spec_location
from pallaslab._src.core.jax_adapter.errors import kernel_call_context as kernel_call_context
from pallaslab._src.core.jax_adapter.errors import op_traceback as op_traceback
from pallaslab._src.core.jax_adapter.errors import pallas_call_context as pallas_call_context
from pallaslab._src.core.jax_adapter.errors import written_grid as written_grid
from pallaslab._src.core.jax_adapter.execution import auto_interpret as auto_interpret
from pallaslab._src.core.jax_adapter.execution import forced_interpret as forced_interpret
from pallaslab._src.core.jax_adapter.execution import gpu_interpret_scope as gpu_interpret_scope
from pallaslab._src.core.jax_adapter.execution import gpu_interpreted as gpu_interpreted
from pallaslab._src.core.jax_adapter.execution import (
    install_cpu_interpret as install_cpu_interpret,
)
from pallaslab._src.core.jax_adapter.execution import (
    install_platform_rule as install_platform_rule,
)
from pallaslab._src.core.jax_adapter.execution import kernel_inputs as kernel_inputs
from pallaslab._src.core.jax_adapter.execution import lowering_state as lowering_state
from pallaslab._src.core.jax_adapter.execution import mesh_interpret as mesh_interpret
from pallaslab._src.core.jax_adapter.execution import (
    quiet_failed_callbacks as quiet_failed_callbacks,
)
from pallaslab._src.core.jax_adapter.execution import recording_kernels as recording_kernels
from pallaslab._src.core.jax_adapter.execution import same_kernel as same_kernel
from pallaslab._src.core.jax_adapter.execution import (
    set_auto_interpret_default as set_auto_interpret_default,
)
from pallaslab._src.core.jax_adapter.execution import set_emulator as set_emulator
from pallaslab._src.core.jax_adapter.execution import site_function as site_function
from pallaslab._src.core.jax_adapter.execution import site_prefetch_count as site_prefetch_count
from pallaslab._src.core.jax_adapter.execution import (
    site_prefetch_offset as site_prefetch_offset,
)
from pallaslab._src.core.jax_adapter.fingerprint import KeyStats as KeyStats
from pallaslab._src.core.jax_adapter.fingerprint import program_key as program_key
from pallaslab._src.core.jax_adapter.fingerprint import trace_context as trace_context
from pallaslab._src.core.jax_adapter.fingerprint import traced_key as traced_key
from pallaslab._src.core.jax_adapter.fingerprint import value_key as value_key
from pallaslab._src.core.jax_adapter.gpu_chips import ChipDevice as ChipDevice
from pallaslab._src.core.jax_adapter.gpu_chips import GpuChip as GpuChip
from pallaslab._src.core.jax_adapter.gpu_chips import GpuWatch as GpuWatch
from pallaslab._src.core.jax_adapter.gpu_chips import gpu_chip_scope as gpu_chip_scope
from pallaslab._src.core.jax_adapter.gpu_export import GpuExport as GpuExport
from pallaslab._src.core.jax_adapter.gpu_export import export_for_gpu as export_for_gpu
from pallaslab._src.core.jax_adapter.gpu_interpret import GPU_INTERPRETER_WHY as GPU_INTERPRETER_WHY
from pallaslab._src.core.jax_adapter.gpu_interpret import GpuRaceAccess as GpuRaceAccess
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    InterpreterFailure as InterpreterFailure,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    OutOfBoundsAccess as OutOfBoundsAccess,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import forget_failures as forget_failures
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    gpu_interpreter_runs as gpu_interpreter_runs,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    guarded_gpu_interpreter as guarded_gpu_interpreter,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    interpreter_failure as interpreter_failure,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    interpreter_out_of_bounds as interpreter_out_of_bounds,
)
from pallaslab._src.core.jax_adapter.gpu_interpret import race_capture as race_capture
from pallaslab._src.core.jax_adapter.gpu_interpret import (
    reset_gpu_interpreter as reset_gpu_interpreter,
)
from pallaslab._src.core.jax_adapter.gpu_timing import kernel_timer_notice as kernel_timer_notice
from pallaslab._src.core.jax_adapter.gpu_timing import kernel_times as kernel_times
from pallaslab._src.core.jax_adapter.indexmaps import (
    index_map_from_jaxpr as index_map_from_jaxpr,
)
from pallaslab._src.core.jax_adapter.kernels import KernelSite as KernelSite
from pallaslab._src.core.jax_adapter.kernels import find_kernel_sites as find_kernel_sites
from pallaslab._src.core.jax_adapter.kernels import jaxpr_constants as jaxpr_constants
from pallaslab._src.core.jax_adapter.kernels import jaxpr_text as jaxpr_text
from pallaslab._src.core.jax_adapter.kernels import kernel_from_site as kernel_from_site
from pallaslab._src.core.jax_adapter.kernels import (
    kernel_operand_positions as kernel_operand_positions,
)
from pallaslab._src.core.jax_adapter.kernels import (
    kernel_parameter_names as kernel_parameter_names,
)
from pallaslab._src.core.jax_adapter.kernels import mesh_kernel_summary as mesh_kernel_summary
from pallaslab._src.core.jax_adapter.kernels import (
    primitives_outside_kernels as primitives_outside_kernels,
)
from pallaslab._src.core.jax_adapter.kernels import program_inputs_of as program_inputs_of
from pallaslab._src.core.jax_adapter.kernels import site_backend as site_backend
from pallaslab._src.core.jax_adapter.lowering import KernelPayload as KernelPayload
from pallaslab._src.core.jax_adapter.lowering import (
    deprecation_notices as deprecation_notices,
)
from pallaslab._src.core.jax_adapter.lowering import export_for_tpu as export_for_tpu
from pallaslab._src.core.jax_adapter.lowering import kernel_avals as kernel_avals
from pallaslab._src.core.jax_adapter.lowering import kernel_function as kernel_function
from pallaslab._src.core.jax_adapter.lowering import kernel_payloads as kernel_payloads
from pallaslab._src.core.jax_adapter.lowering import lower_module as lower_module
from pallaslab._src.core.jax_adapter.lowering import (
    lowering_error_location as lowering_error_location,
)
from pallaslab._src.core.jax_adapter.lowering import (
    lowering_error_primitive as lowering_error_primitive,
)
from pallaslab._src.core.jax_adapter.lowering import module_text as module_text
from pallaslab._src.core.jax_adapter.lowering import (
    mosaic_gpu_default_semantics as mosaic_gpu_default_semantics,
)
from pallaslab._src.core.jax_adapter.lowering import sites_on_chip as sites_on_chip
from pallaslab._src.core.jax_adapter.lowering import tpu_chip as tpu_chip
from pallaslab._src.core.jax_adapter.lowering import tpu_chip_known as tpu_chip_known
from pallaslab._src.core.jax_adapter.lowering import with_vmem_limit as with_vmem_limit
from pallaslab._src.core.jax_adapter.mosaic_gpu.reading import kernel_plan as kernel_plan
from pallaslab._src.core.jax_adapter.outputs import output_writers as output_writers
from pallaslab._src.core.jax_adapter.probes import CALL_PRIMITIVES as CALL_PRIMITIVES
from pallaslab._src.core.jax_adapter.probes import MESH_KERNELS as MESH_KERNELS
from pallaslab._src.core.jax_adapter.probes import feature_notice as feature_notice
from pallaslab._src.core.jax_adapter.probes import (
    mosaic_gpu_pallas_call_notice as mosaic_gpu_pallas_call_notice,
)
from pallaslab._src.core.jax_adapter.probes import triton_deprecation as triton_deprecation
from pallaslab._src.core.jax_adapter.replay import replay_function as replay_function
from pallaslab._src.core.jax_adapter.replay import same_avals as same_avals
from pallaslab._src.core.jax_adapter.replay import snapshot_scope as snapshot_scope
from pallaslab._src.core.jax_adapter.replay import traced_avals as traced_avals
from pallaslab._src.core.jax_adapter.shapes import forget_kernel_traces as forget_kernel_traces
