"""Records of a traced program: its kernels, their operands, index maps and sources.

Frozen dataclasses of plain Python and NumPy values: no JAX objects. The core builds
them (`core/jax_adapter/`); views, tests and analyses read them. Operations on a kernel
that need more than its own fields (its tile map, its races) are functions of the layers
above (`geometry`, `core`), never methods here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from pallaslab._src.base import sources
from pallaslab._src.records.indexmap import IndexMap

Role = Literal["in", "out", "scratch"]
# A source map entry: (line in the text, source file, line in that file), 1-based.
SourceMapEntry = tuple[int, str, int]


@dataclasses.dataclass(frozen=True)
class SourceLocation:
    """A place in Python source.

    Attributes:
        file: The file name as Python knows it (a cell's is a temporary file).
        line: 1-based line number.
        function: The enclosing function's name, when known.
    """

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        # "Cell [3] line 10" in a notebook cell, "path/kernels.py:31" in a file.
        return sources.location(self.file, self.line)


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one array argument or result of a program.

    Attributes:
        path: Where the array sits in the arguments or results, e.g. "x" or "[0]".
        shape: The array's shape.
        dtype: The dtype's name, e.g. "float32".
    """

    path: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"


@dataclasses.dataclass(frozen=True)
class Operand:
    """One buffer a kernel sees: an input, an output or a scratch buffer.

    Attributes:
        position: Index among the kernel function's arguments (0-based).
        role: "in", "out" or "scratch".
        name: The kernel parameter's name (e.g. "x_ref"), "" when unknown.
        origin: Where it comes from: the program's argument passed to it unchanged
            ("x"), else as JAX names it ("args[0]", "outputs", "scratch[1]").
        shape: Shape of the whole array (for scratch: of the buffer).
        dtype: The dtype's name.
        block_shape: The block each program sees, one entry per array dimension;
            None for a squeezed dimension. For scratch, the buffer's shape.
        block_kinds: Per dimension: "blocked", "squeezed", "element" or
            "bounded" (from `pl.Blocked`, `pl.Squeezed`, `pl.Element`,
            `pl.BoundedSlice`); "full" for scratch.
        index_map: The BlockSpec's index map; None for scratch.
        memory_space: Where the block lives: "default", "vmem", "smem", "any",
            "hbm", "gmem", "smem" ...
        buffer_count: Pipeline buffers requested with `pl.Buffered(n)`, if any.
        scalar_prefetch: True for scalar-prefetch operands (TPU), which the kernel
            and every index map receive whole.
        element_padding: Per dimension, the (low, high) padding of `pl.Element`
            dimensions: their index map returns an offset into the array padded by
            `low` elements before and `high` after. Empty when there is none.
        revisit: How an output block may be revisited on TPU, from
            `pl.Buffered(..., revisit=pl.RevisitMode.ANY)`: "any" (at any later
            step: the pipeline reads it back), "immediate" (only by the next
            program, the default), "" when not given.
    """

    position: int
    role: Role
    name: str
    origin: str
    shape: tuple[int, ...]
    dtype: str
    block_shape: tuple[int | None, ...]
    block_kinds: tuple[str, ...]
    index_map: IndexMap | None
    memory_space: str
    buffer_count: int | None = None
    scalar_prefetch: bool = False
    element_padding: tuple[tuple[int, int], ...] = ()
    revisit: str = ""

    @property
    def block_elements(self) -> int:
        """Elements in one block (squeezed dimensions count 1)."""
        return math.prod(1 if b is None else b for b in self.block_shape)

    @property
    def block_bytes(self) -> int:
        """Bytes in one block (0 for semaphores, which hold no data)."""
        return self.block_elements * _itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes in the whole array (0 for semaphores)."""
        return math.prod(self.shape) * _itemsize(self.dtype)

    @property
    def label(self) -> str:
        """A short human name: the parameter name, else role and position."""
        return self.name or f"{self.role}{self.position}"

    @property
    def blockspec_location(self) -> SourceLocation | None:
        """The line of the operand's BlockSpec (its index map), when known."""
        index_map = self.index_map
        if index_map is None or not index_map.source_file:
            return None
        return SourceLocation(index_map.source_file, index_map.source_line)


def _itemsize(dtype: str) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # a semaphore ("dma_sem", "semaphore"): no data
        return 0


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """The cost a kernel declares with `pl.CostEstimate`."""

    flops: int
    transcendentals: int
    bytes_accessed: int


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One Pallas kernel found in a traced program.

    Attributes:
        index: Order of this kernel in the program (0-based).
        name: The kernel's name: `pallas_call(name=...)` or the kernel function's.
        kind: "pallas_call"; for mesh kernels (whole refs over a mesh of cores),
            "plgpu.kernel" on a GPU mesh (`plgpu.kernel`, `pl.kernel`,
            `pl.core_map`), "pl.kernel" or "pl.core_map" on a TPU one.
        grid: The grid (after vmap, which adds axes).
        grid_names: Names of the grid axes, when given.
        operands: Inputs, outputs and scratch buffers, in kernel-argument order.
        jaxpr: The kernel body as jaxpr text.
        jaxpr_source_map: For lines of `jaxpr`: (jaxpr line, file, source line).
        source: Where the kernel function is defined.
        call_site: Where the program invoked the kernel, when known.
        backend: The backend its compiler params select ("triton", "mosaic_tpu",
            "mosaic_gpu"), or its mesh's for a mesh kernel; "" when none is known.
        compiler_params: The compiler params' fields as (name, repr) pairs.
        dimension_semantics: Per grid axis ("parallel", "arbitrary", ...), when given.
        cost_estimate: The declared cost, when given.
        interpret: How the kernel asked to be interpreted ("" when it did not).
        vmapped_dims: Grid axes added by `jax.vmap`.
        num_scalar_prefetch: Leading inputs that are scalar-prefetch operands.
        input_output_aliases: (input index, output index) pairs.
        path: The primitives enclosing the kernel, outermost first, e.g.
            ("jit(matmul)", "scan").
        work: The arithmetic the kernel body does over the whole grid, counted from
            its jaxpr (None when it could not be counted).
        unused: Positions of the operands the kernel body never touches (an input
            aliased to an output only to pass its memory along, `del zeros_ref`).
    """

    index: int
    name: str
    kind: str
    grid: tuple[int, ...]
    grid_names: tuple[str, ...] | None
    operands: tuple[Operand, ...]
    jaxpr: str
    jaxpr_source_map: tuple[SourceMapEntry, ...]
    source: SourceLocation | None
    call_site: SourceLocation | None
    backend: str = ""
    compiler_params: tuple[tuple[str, str], ...] = ()
    dimension_semantics: tuple[str, ...] | None = None
    cost_estimate: CostEstimate | None = None
    interpret: str = ""
    vmapped_dims: tuple[int, ...] = ()
    num_scalar_prefetch: int = 0
    input_output_aliases: tuple[tuple[int, int], ...] = ()
    path: tuple[str, ...] = ()
    work: KernelWork | None = None
    unused: tuple[int, ...] = ()

    @property
    def inputs(self) -> tuple[Operand, ...]:
        """The input operands (scalar-prefetch ones included)."""
        return tuple(o for o in self.operands if o.role == "in")

    @property
    def outputs(self) -> tuple[Operand, ...]:
        """The output operands."""
        return tuple(o for o in self.operands if o.role == "out")

    @property
    def scratch(self) -> tuple[Operand, ...]:
        """The scratch buffers."""
        return tuple(o for o in self.operands if o.role == "scratch")

    @property
    def num_programs(self) -> int:
        """How many programs the grid runs."""
        return math.prod(self.grid)

    @property
    def block_shapes(self) -> tuple[tuple[int | None, ...], ...]:
        """Block shape of every operand, in order."""
        return tuple(o.block_shape for o in self.operands)


def short_dtype(dtype: str) -> str:
    """JAX's short dtype spelling: float32 -> f32, bfloat16 -> bf16."""
    for long, short in (
        ("bfloat", "bf"),
        ("float", "f"),
        ("uint", "u"),
        ("int", "i"),
        ("complex", "c"),
    ):
        if dtype.startswith(long):
            return short + dtype[len(long) :]
    return "bool" if dtype == "bool" else dtype


@dataclasses.dataclass(frozen=True)
class KernelWork:
    """Arithmetic a kernel does, counted from its traced body.

    Attributes:
        flops: Floating-point operations over the whole grid: 2*M*N*K per matrix
            product, one per element per elementwise operation (integer index
            arithmetic is not counted).
        transcendentals: exp, log, tanh, ... evaluations over the whole grid.
        exact: False when a loop's trip count is only known at run time (such loops
            are counted once) or a branch was taken as its costlier side.
        matmul_flops: The part of `flops` in matrix products (`dot_general`): what
            the MXU or the tensor cores can take. None when not counted.
        matmul_dtypes: The dtypes the matrix products multiply (each dot's widest
            operand dtype as the dot sees it), e.g. ("bfloat16",); () without one.
    """

    flops: int
    transcendentals: int
    exact: bool = True
    matmul_flops: int | None = None
    matmul_dtypes: tuple[str, ...] = ()
