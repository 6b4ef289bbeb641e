"""Reading context for error messages out of JAX tracebacks."""

from __future__ import annotations

import dataclasses
import types

from pallaslab._src.records import SourceLocation


@dataclasses.dataclass(frozen=True)
class KernelCallContext:
    """What JAX knew about a kernel whose tracing failed."""

    kernel_name: str
    kernel_location: SourceLocation | None
    num_inputs: int
    num_outputs: int
    num_scratch: int
    num_prefetch: int


def kernel_call_context(traceback: types.TracebackType | None) -> KernelCallContext | None:
    """Finds the `pallas_call` being traced when an exception was raised.

    Reads the locals of JAX's `pallas_call` wrapper frame in the traceback (the
    grid mapping and the kernel function), which is the only place they exist when
    tracing the kernel body fails.
    """
    mapping = kernel = scratch_tree = None
    tb = traceback
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.endswith("pallas_call.py") and "grid_mapping" in frame.f_locals:
            local = frame.f_locals
            mapping = local["grid_mapping"]
            kernel = local.get("kernel", kernel)
            scratch_tree = local.get("scratch_tree", scratch_tree)
        tb = tb.tb_next
    if mapping is None:
        return None
    function = getattr(kernel, "func", kernel)  # functools.partial
    code = getattr(function, "__code__", None)
    return KernelCallContext(
        kernel_name=getattr(function, "__name__", "kernel"),
        kernel_location=(
            SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
            if code is not None
            else None
        ),
        num_inputs=int(mapping.num_inputs),
        num_outputs=int(mapping.num_outputs),
        num_scratch=int(getattr(scratch_tree, "num_leaves", len(mapping.scratch_avals))),
        num_prefetch=int(mapping.num_index_operands),
    )


def block_spec_location(traceback: types.TracebackType | None) -> SourceLocation | None:
    """Where the BlockSpec being converted when an exception was raised was written.

    JAX converts each BlockSpec in a frame whose `block_spec` local holds it; the
    index map function's code gives the line (usually the BlockSpec's own line).
    """
    found = None
    tb = traceback
    while tb is not None:
        spec = tb.tb_frame.f_locals.get("block_spec")
        index_map = getattr(spec, "index_map", None)
        # JAX wraps index maps (`_IndexMapFunc`), sometimes twice; unwrap to the
        # user's function.
        for _ in range(8):
            if hasattr(index_map, "__code__"):
                break
            index_map = getattr(index_map, "__wrapped__", None)
        code = getattr(index_map, "__code__", None)
        if code is not None:
            found = SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
        tb = tb.tb_next
    return found
