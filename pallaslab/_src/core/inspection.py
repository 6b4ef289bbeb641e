"""An inspection: the records of a traced program, and what can be done with it.

`inspect(fn, *args)` traces a call into an `Inspection`: the records `Traced` holds
(`core/program.py`), with the core's operations as methods (run, check, lower, tile
maps, figures of merit, element accesses, races, hints, reproducers). Each method is
a function of the core module that owns it; this class only gathers them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import display
from pallaslab._src.core.program import Traced
from pallaslab._src.core.tracing import trace_program
from pallaslab._src.records import Kernel, RunResult
from pallaslab._src.records.checks import CheckResult
from pallaslab._src.records.lowered import Lowered

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from pallaslab._src.core.reproducer import Reproducer
    from pallaslab._src.core.sharing import RaceReport
    from pallaslab._src.geometry.accesses import BlockAccesses
    from pallaslab._src.geometry.merit import KernelMerit
    from pallaslab._src.geometry.mosaic_gpu import SmemBudget
    from pallaslab._src.geometry.races import Conflict
    from pallaslab._src.geometry.tilemap import TileMap
    from pallaslab._src.records.cost import CostTable
    from pallaslab._src.records.fit import FitTable
    from pallaslab._src.records.hints import Hint
    from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan


def inspect(
    fn: Callable[..., Any], *args: Any, chip: str | None = None, **kwargs: Any
) -> Inspection:
    """Traces `fn(*args, **kwargs)` and describes every Pallas kernel it runs.

    Nothing runs and nothing large is allocated: arguments may be
    `jax.ShapeDtypeStruct`s. Array leaves (and `ShapeDtypeStruct`s) are traced;
    every other leaf (ints, strings, callables ...) is passed to `fn` as is, so
    block sizes and activation functions can be ordinary Python values.

    Args:
        fn: Any JAX-traceable callable: a `pallas_call`, a jitted function, a
            `vmap`, a function under `jax.grad` ...
        *args: Example positional arguments.
        chip: The GPU or TPU to trace for ("B200", "H100", "v6e"): the device queries
            kernels make while traced (the SM count of a persistent grid, the compute
            capability, `pltpu.get_tpu_info()`) answer as that chip, in runs and
            lowerings too. By default the device at hand; off a GPU, GPU kernels are
            traced for an H100 and TPU ones for the `tpu_generation` setting (v5e).
            The inspector's header says which (`Inspection.chip`).
        **kwargs: Example keyword arguments.

    Returns:
        The inspection: the program's jaxpr and one `Kernel` record per Pallas kernel
        found anywhere in it.

    Raises:
        ValueError: For a chip not in pallaslab's hardware table.

    Example:
        >>> insp = pallaslab.inspect(add, jax.ShapeDtypeStruct((1024,), jnp.float32),
        ...                          jax.ShapeDtypeStruct((1024,), jnp.float32))
        >>> insp.kernels[0].grid
        (8,)
    """
    return trace(fn, args, kwargs, chip=chip)


def trace(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    chip: str | None = None,
) -> Inspection:
    """`inspect`, with the arguments as a sequence and a dict (for callers with both)."""
    return Inspection.from_program(trace_program(fn, args, dict(kwargs or {}), chip=chip))


class Inspection(Traced):
    """Everything pallaslab learned about a program and its Pallas kernels.

    Records (see `Traced` for the fields: `name`, `args`, `outputs`, `jaxpr`,
    `kernels`, `backend`, `result`, `notices`), plain Python and NumPy values, and
    the operations on the traced program as methods.
    """

    def tiles(
        self,
        kernel: int | str = 0,
        prefetch: Sequence[Any] | None = None,
        schedule: str | None = None,
    ) -> TileMap:
        """The tile map of a kernel: which block of each operand every program sees.

        Index maps that read scalar-prefetch values get those of the example
        arguments (seeded random arrays where only shapes were given: the same
        `run()` uses), unless `prefetch` gives them.

        Args:
            kernel: The kernel's index or name (default: the first kernel).
            prefetch: The scalar-prefetch operands' values, overriding the examples'.
            schedule: "tpu" (programs run one after another, in row-major order) or
                "gpu" (all at once); by default the kernel's backend decides, else
                the backend at hand.

        Example:
            >>> tiles = inspection.tiles()
            >>> tiles.ranges(0, (1, 2))   # rows and columns of operand 0's block
            ((64, 128), (0, 128))
        """
        from pallaslab._src.core import tiling  # noqa: PLC0415

        return tiling.tile_map(self, kernel, prefetch, schedule)

    def merit(self, kernel: int | str = 0, schedule: str | None = None) -> KernelMerit:
        """A kernel's tiling in numbers: reuse, HBM traffic, working set, intensity.

        Reads per element, bytes moved against the minimum, the working set against
        VMEM or shared memory, arithmetic intensity; `.on_chip("H100")` puts them
        against a chip from the hardware table (fits, ridge point, bound by memory or
        by compute, attainable FLOP/s).

        Args:
            kernel: The kernel's index or name (default: the first kernel).
            schedule: "tpu" or "gpu" (decides what is copied again); default: the
                tile map's.
        """
        from pallaslab._src.core import mosaic_gpu  # noqa: PLC0415
        from pallaslab._src.geometry.merit import kernel_merit  # noqa: PLC0415

        tiles = self.tiles(kernel)
        if mosaic_gpu.is_mosaic_gpu(tiles.kernel):
            return mosaic_gpu.merit(tiles, self)
        return kernel_merit(tiles, schedule)

    def plan(self, kernel: int | str = 0) -> MosaicGpuPlan:
        """What a Mosaic GPU kernel does, for every CTA of its grid.

        Its SMEM, TMEM and register allocations (with their transforms), every copy
        between GMEM and the chip (TMA copies, a pipeline's, loads and stores of GMEM
        refs: windows, bytes, how often), every matrix product (`wgmma`,
        `tcgen05_mma`, dots: shapes, dtypes, layouts, FLOPs), its pipelines (slots,
        steps, runs) and its persistent loop, read off the traced body.
        `.smem(kernel).on_chip("H100")` puts its SMEM against a chip.

        Args:
            kernel: The kernel's index or name (default: the first kernel).

        Raises:
            ValueError: For kernels that are not Mosaic GPU kernels.
        """
        from pallaslab._src.core import mosaic_gpu  # noqa: PLC0415

        return mosaic_gpu.kernel_plan(self, kernel)

    def smem(self, kernel: int | str = 0) -> SmemBudget:
        """The shared memory a Mosaic GPU kernel asks for, as its lowering computes it.

        Every buffer aligned to 1 KiB (scopes that run one after another share
        memory), 8 bytes per barrier, 4 for a TMEM address: `.total`, `.lines` (each
        allocation, and whether it is live at the peak), `.on_chip("H100")`.
        """
        from pallaslab._src.core import mosaic_gpu  # noqa: PLC0415

        return mosaic_gpu.budget(self, kernel)

    def accesses(
        self, kernel: int | str = 0, program: Sequence[int] | None = None
    ) -> BlockAccesses:
        """Every element-level load and store of one program (default: the first).

        The kernel body is interpreted for that program on its blocks of the
        example inputs: `pl.ds` offsets, strided slices and masks are followed lane
        by lane. `.map(ref)` sums them per buffer element.
        """
        from pallaslab._src.core import tiling  # noqa: PLC0415

        return tiling.block_accesses(self, kernel, program)

    def races(self, kernel: int | str | Kernel = 0, backend: str = "gpu") -> list[Conflict]:
        """Where a kernel's programs conflict under a backend's rules.

        Under GPU rules every grid axis runs in parallel, so two programs writing one
        output block race; under TPU rules only "parallel" axes may be split across
        cores, and a block left and revisited later is not read back. Index maps that
        read scalar-prefetch values get those of the example arguments (seeded random
        arrays where only shapes were given: the same `run()` uses), as `tiles()`
        does; and outputs that programs share in memory (a whole-array or `pl.ANY` ref, each program
        storing its own part with `pl.ds` and masks) are decided under GPU rules
        element by element, running the kernel on the example inputs: only two
        programs storing the same element, or one loading what another stores, race.

        Args:
            kernel: The kernel's index or name (default: the first kernel), or its
                record.
            backend: "gpu" or "tpu".

        Raises:
            ValueError: When an index map cannot be evaluated, or reads prefetch
                values that cannot be known here.
        """
        return list(self.race_report(kernel, backend).conflicts)

    def race_report(self, kernel: int | str | Kernel = 0, backend: str = "gpu") -> RaceReport:
        """`races`, with the inspector's sentences and what could not be checked."""
        from pallaslab._src.core import tiling  # noqa: PLC0415

        index = kernel.index if isinstance(kernel, Kernel) else kernel
        return tiling.race_report(self, index, backend)  # type: ignore[no-any-return]

    def run(
        self, *args: Any, ref: Any = None, check: bool | None = None, **kwargs: Any
    ) -> RunResult:
        """Runs the program on the backend at hand (emulated on CPU).

        Args:
            *args: Arguments, laid out as for `pallaslab.inspect`; with none, random
                (seeded) arrays of the traced shapes are used.
            ref: A reference to compare with: a callable taking the same arguments,
                or the expected output(s).
            check: Whether to look for padding leaks and confirm races after an
                emulated run (`RunResult.leaks`, `.race_checks`); None: whenever the
                emulator ran every kernel.
            **kwargs: Keyword arguments, as for `pallaslab.inspect`.
        """
        from pallaslab._src.core import running  # noqa: PLC0415

        return running.run(self, args, kwargs, ref=ref, check=check)

    def check(
        self,
        ref: Any,
        *args: Any,
        make_args: Callable[[Any], Any] | None = None,
        sizes: Sequence[Any] | None = None,
        dtypes: Sequence[Any] | None = None,
        seed: int = 0,
        rtol: float | None = None,
        atol: float | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> CheckResult:
        """Checks the program against a reference and locates mismatches per output block.

        Args:
            ref: A callable taking the same arguments, or the expected output(s).
            *args: Inputs laid out as for `pallaslab.inspect`; without them, the
                inspected arguments (seeded random data where they were shapes).
            make_args: `make_args(size)` gives the inputs for one size (with `sizes`).
            sizes: Sizes to check.
            dtypes: Also check with floating inputs cast to each of these dtypes.
            seed: Seed of the random inputs.
            rtol: Relative tolerance (default: fit for each output's dtype).
            atol: Absolute tolerance relative to the reference's largest magnitude.
            kwargs: Keyword arguments, as for `pallaslab.inspect`.

        Returns:
            `.ok`, `.max_abs_err`, `.max_rel_err`, `.bad_tiles` (the output blocks
            that differ), `.heatmap`, one point per set of inputs.
        """
        from pallaslab._src.core.reference import check_traced  # noqa: PLC0415

        return check_traced(
            self,
            ref,
            args,
            kwargs,
            make_args=make_args,
            sizes=sizes,
            dtypes=dtypes,
            seed=seed,
            rtol=rtol,
            atol=atol,
        )

    def lower(self, target: str, kernel: str | int = 0) -> Lowered:
        """A kernel lowered for a target: its IR, linked to source lines, and resources.

        Lowered once per kernel and target, then cached. Works on any machine: GPU
        and TPU targets are cross-lowered (see `pallaslab.targets()`).

        Args:
            target: "stablehlo[:cuda|:tpu]" (the whole program), "mosaic-gpu",
                "triton", "ttgir|llir|ptx|sass:sm_90" (any of sm_80 ... sm_120),
                "mosaic-tpu:v5e" or "tpu-compile:v5e" (v4, v5e, v5p, v6e, 7x),
                "xla-gpu:H100" (A100, H100, H200, B200: XLA's own compile).
            kernel: The kernel's name or index (default: the first kernel).

        Returns:
            A `Lowered` record: `.text`, `.source_map`, `.resources`, `.error` ...
            A target that cannot take the kernel returns its error in `.error`.

        Example:
            >>> inspection.lower("ptx:sm_90").text.count("wgmma")
        """
        from pallaslab._src.core import lowering  # noqa: PLC0415

        return lowering.lower(self, target, kernel)

    def lowerings(self) -> list[Lowered]:
        """What `lower` produced for this inspection so far, the latest asked for last."""
        from pallaslab._src.core import lowering  # noqa: PLC0415

        return lowering.lowerings(self)

    def fit(
        self,
        kernel: int | str = 0,
        chips: Sequence[str] | None = None,
        *,
        parallel: int | None = None,
        compile: bool = True,
    ) -> pd.DataFrame:
        """Whether a kernel's memory fits on each chip, from each chip's real compile.

        TPU (v4, v5e, v5p, v6e, 7x; libtpu): the scoped VMEM the compile allocates
        (its allocation table: blocks x buffers, scratch, spills) against the kernel's
        `vmem_limit_bytes` or the chip's default scoped limit; over it, the exact
        `vmem_limit_bytes` to pass, or that it does not fit on the chip. GPU (A100,
        H100, H200, B200; XLA's compile): shared memory per block and registers.
        Chips compile in parallel (worker processes), once per kernel and chip.

        Args:
            kernel: The kernel's index or name (default: the first kernel).
            chips: The chips (default: every TPU and GPU above).
            parallel: Compiles at once (default: up to 4).
            compile: False: compile nothing; chips compiled for already are read,
                the others estimated from the BlockSpecs (TPU) or left unknown (GPU).

        Returns:
            One row per chip: chip, target, memory, needed_bytes, needed_from ("read",
            "read, rounded" or "estimated"), limit_bytes, limit_from, capacity_bytes,
            verdict ("fits", "fits-with-limit", "does-not-fit", "unknown"),
            vmem_limit_bytes (the value to pass), estimated_bytes, smem_bytes,
            semaphores, registers_per_thread, message. `fit_table()` has the records.

        Example:
            >>> inspection.fit(chips=["v5e", "v6e"])[["chip", "verdict", "vmem_limit_bytes"]]
        """
        return self.fit_table(kernel, chips, parallel=parallel, compile=compile).to_frame()

    def fit_table(
        self,
        kernel: int | str = 0,
        chips: Sequence[str] | None = None,
        *,
        parallel: int | None = None,
        compile: bool = True,
    ) -> FitTable:
        """`fit()` as records: a `FitTable` of `MemoryFit`s, with the parts of each figure."""
        from pallaslab._src.core import fit  # noqa: PLC0415

        return fit.fit_table(
            self, kernel, chips, parallel=parallel or fit.PARALLEL, compile=compile
        )

    def cost(self, target: str, kernel: int | str = 0) -> pd.DataFrame:
        """A kernel's static cost per source line on one target (its compiled code).

        TPU (`tpu-compile:<chip>`): per line, the VLIW bundles its ops sit in and the
        ops it issues on each unit (MXU, VPU, XLU, EUP, vld, vst, scalar, sync, DMA),
        read from libtpu's final bundles. GPU (SASS: `sass:sm_90`, `xla-gpu:H100`):
        per line, instructions by class and the stall cycles, yields, scoreboard
        barriers and waits their control codes encode.

        Returns:
            One row per source line; `.attrs["cycles_estimate"]` is the static cycle
            estimate of one pass of the kernel body. `cost_table()` has the record.
        """
        return self.cost_table(target, kernel).to_frame()

    def cost_table(self, target: str, kernel: int | str = 0) -> CostTable:
        """`cost()` as a `CostTable` record: per-line costs, loop-body bundles and slots."""
        from pallaslab._src.core import cost  # noqa: PLC0415

        return cost.cost(self, target, kernel)

    def hints(
        self,
        kernel: int | str | None = None,
        *,
        chip: str | None = None,
        target: str | None = None,
        masks: bool = True,
    ) -> list[Hint]:
        """Performance hints for the kernels, each tied to the source line to change.

        Args:
            kernel: One kernel (name or index); by default every kernel.
            chip: The chip to advise for ("H100", "v5e"); default: the backend's.
            target: A GPU target to compile for registers and occupancy ("ptx:sm_90").
            masks: Look for masks that switch off most lanes in a few programs.

        Example:
            >>> for hint in inspection.hints(chip="v5e"):
            ...     print(hint)   # file:line: warning: ...
        """
        from pallaslab._src.core.hints import hints  # noqa: PLC0415

        return hints(self, kernel=kernel, chip=chip, target=target, masks=masks)

    def reproducer(
        self,
        path: str | Path,
        save_inputs: bool = False,
        *,
        kernel: int | str = 0,
        target: str | None = None,
        overwrite: bool = False,
    ) -> Reproducer:
        """Writes a standalone script that rebuilds one kernel call and reproduces it.

        The script needs JAX and NumPy only (no pallaslab): the kernel's source with
        what it closes over, the `pallas_call` as written (shapes, dtypes, BlockSpecs,
        compiler params), and the operands. Run, it prints its outputs' checksums and
        whether they equal pallaslab's (exit status 1 when not, or on an error, which
        is then the reproduction).

        Args:
            path: The script to write, e.g. "bug.py".
            save_inputs: Also save the kernel's operands and pallaslab's outputs to
                "bug.npz" beside it (else the script makes seeded random operands).
            kernel: The kernel's name or index (default: the first).
            target: Lower for this target instead of running (e.g. "triton",
                "mosaic-tpu:v5e"): the script prints the IR, or the error.
            overwrite: Replace files already there; without it, a script or `.npz`
                that exists is never replaced (a `ValueError` says which).

        Returns:
            What was written, and what could not be (`.problems`).

        Example:
            >>> inspection.reproducer("bug.py", save_inputs=True)
            >>> # $ python bug.py  ->  output 0: float32[256, 256] sha256=... equal ...
        """
        from pallaslab._src.core.reproducer import write_reproducer  # noqa: PLC0415

        return write_reproducer(
            self, path, kernel=kernel, save_inputs=save_inputs, target=target, overwrite=overwrite
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("inspection", self, **kwargs)

    def __repr__(self) -> str:
        kernels = ", ".join(f"{k.name} grid={k.grid}" for k in self.kernels) or "no kernels"
        return f"<Inspection of {self.name}: {kernels}>"
