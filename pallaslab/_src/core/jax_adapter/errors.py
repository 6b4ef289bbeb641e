"""Reading context for error messages out of JAX tracebacks."""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any

from pallaslab._src.base import sources
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
        kernel_location=_code_location(code),
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
        found = _code_location(getattr(index_map, "__code__", None)) or found
        tb = tb.tb_next
    return found


def op_traceback(error: BaseException) -> types.TracebackType | None:
    """Where the JAX operation that failed was written, when JAX kept it.

    An error met while lowering or running a traced program (not while tracing it)
    carries, in its cause chain, JAX's `JaxStackTraceBeforeTransformation`: the stack
    at the moment the failing operation was traced, which ends at the user's line.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "JaxStackTraceBeforeTransformation":
            return current.__traceback__
        current = current.__cause__ or current.__context__
    return None


@dataclasses.dataclass(frozen=True)
class BlockSpecContext:
    """The BlockSpec JAX was converting when an exception was raised.

    Attributes:
        origin: Which operand it is for, as JAX names it ("args[0]", "outputs").
        location: Where the user's function in it was written: the index map, or,
            with the arguments in the old order, the function given as block shape.
        params: That function's parameter names (None when it has no signature).
        num_grid: Grid indices the index map is called with.
        num_prefetch: Scalar-prefetch refs it is called with after them.
        old_order: Whether the block shape is a function (`BlockSpec(index_map,
            block_shape)`, the argument order before JAX 0.4.31).
    """

    origin: str
    location: SourceLocation | None
    params: tuple[str, ...] | None
    num_grid: int
    num_prefetch: int
    old_order: bool


def _user_function(value: Any) -> Any:
    # JAX wraps index maps (`_IndexMapFunc`), sometimes twice; unwrap to the user's.
    for _ in range(8):
        if hasattr(value, "__code__"):
            return value
        value = getattr(value, "__wrapped__", None) or getattr(value, "index_map", None)
    return None


def _location_of(function: Any) -> SourceLocation | None:
    return _code_location(getattr(function, "__code__", None))


def _code_location(code: Any) -> SourceLocation | None:
    """Where a function's code is, unless it is JAX's or pallaslab's own.

    Those (a wrapper, a default index map) are no one's source to point at.
    """
    if code is None or sources.is_internal_file(code.co_filename):
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)


def _params_of(function: Any) -> tuple[str, ...] | None:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None


def block_spec_context(traceback: types.TracebackType | None) -> BlockSpecContext | None:
    """The BlockSpec being converted when an exception was raised (its innermost frame).

    JAX converts each BlockSpec in `to_block_mapping` (the spec is `self`) called by
    `_convert_block_spec_to_block_mapping` (the spec is `block_spec`); their locals say
    which operand it is for, the grid and the index map's argument avals.
    """
    found: BlockSpecContext | None = None
    tb = traceback
    while tb is not None:
        local = tb.tb_frame.f_locals
        spec = local.get("block_spec")
        if spec is None and tb.tb_frame.f_code.co_name == "to_block_mapping":
            spec = local.get("self")
        if spec is not None and hasattr(spec, "block_shape") and "origin" in local:
            block_shape = getattr(spec, "block_shape", None)
            old_order = callable(block_shape)
            function = block_shape if old_order else _user_function(spec.index_map)
            grid = local.get("grid") or ()
            avals = local.get("index_map_avals") or ()
            num_grid = len(grid) if isinstance(grid, tuple | list) else 0
            found = BlockSpecContext(
                origin=str(local.get("origin", "")),
                location=_location_of(function),
                params=_params_of(function) if function is not None else None,
                num_grid=num_grid,
                num_prefetch=max(0, len(avals) - num_grid),
                old_order=old_order,
            )
        tb = tb.tb_next
    return found


@dataclasses.dataclass(frozen=True)
class PallasCallContext:
    """The `pallas_call` being applied when an exception was raised.

    Attributes:
        kernel: What was passed as the kernel (a function, or whatever it was).
        in_specs: Where each input BlockSpec's index map was written (None where
            it has none of the user's).
        out_specs: The same for the outputs.
    """

    kernel: Any
    in_specs: tuple[SourceLocation | None, ...]
    out_specs: tuple[SourceLocation | None, ...]

    @property
    def spec_locations(self) -> tuple[SourceLocation, ...]:
        """Every index map location known, outputs first."""
        return tuple(loc for loc in (*self.out_specs, *self.in_specs) if loc is not None)


def _spec_leaves(specs: Any) -> list[Any]:
    if isinstance(specs, dict):
        return [leaf for value in specs.values() for leaf in _spec_leaves(value)]
    if isinstance(specs, list | tuple):
        return [leaf for value in specs for leaf in _spec_leaves(value)]
    return [specs]


def pallas_call_context(traceback: types.TracebackType | None) -> PallasCallContext | None:
    """Finds the `pallas_call` wrapper frame (its `kernel` and `grid_spec` locals)."""
    kernel: Any = None
    grid_spec: Any = None
    seen = False
    tb = traceback
    while tb is not None:
        frame = tb.tb_frame
        local = frame.f_locals
        if frame.f_code.co_filename.endswith("pallas_call.py") and "kernel" in local:
            if not seen:  # the outermost: what the user passed
                kernel, seen = local["kernel"], True
            grid_spec = local.get("grid_spec", grid_spec)
        tb = tb.tb_next
    if not seen:
        return None
    locations = [
        tuple(
            _location_of(_user_function(getattr(spec, "index_map", None)))
            for spec in _spec_leaves(getattr(grid_spec, which, None) or ())
        )
        for which in ("in_specs", "out_specs")
    ]
    return PallasCallContext(kernel, locations[0], locations[1])


def written_grid(params: dict[str, Any]) -> tuple[int | None, ...]:
    """A pallas_call's grid as written: ints, None for sizes known only at run time."""
    grid = getattr(params.get("grid_mapping"), "grid", ()) or ()
    return tuple(int(d) if isinstance(d, int) else None for d in grid)
