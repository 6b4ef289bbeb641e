"""The result of inspecting a program: records, plus a handle to rerun it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pallaslab._src.core import display, jax_adapter
from pallaslab._src.lowered import Lowered
from pallaslab._src.records import ArraySpec, Kernel, RunResult

if TYPE_CHECKING:
    from pathlib import Path

    from pallaslab._src.bench.check import CheckResult
    from pallaslab._src.core.reproducer import Reproducer
    from pallaslab._src.core.sharing import RaceReport
    from pallaslab._src.geometry.accesses import BlockAccesses
    from pallaslab._src.geometry.races import Conflict
    from pallaslab._src.geometry.tilemap import TileMap
    from pallaslab._src.perfhints import Hint


@dataclasses.dataclass(frozen=True)
class Program:
    """A traced program as the core holds it (JAX objects inside; never shown).

    Attributes:
        name: The traced callable's name.
        flat_fn: The callable over the traced (array) leaves only.
        closed_jaxpr: The program's closed jaxpr; None for kernels recorded while a
            cell ran, where no single program was traced.
        args: The traced leaves' shapes and dtypes.
        outputs: The results' shapes and dtypes.
        example_args: The example leaves (arrays or ShapeDtypeStructs).
        sites: The kernels as bound in the program.
        jitted: `jax.jit(flat_fn)`, made once so reruns hit JAX's compile cache.
        split: Takes (args, kwargs) laid out as for the traced callable and returns
            the leaves that are traced.
        rebuild: Takes the traced leaves and returns (args, kwargs) for the callable.
    """

    name: str
    flat_fn: Callable[..., Any] | None
    closed_jaxpr: Any
    args: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    example_args: tuple[Any, ...]
    sites: tuple[jax_adapter.KernelSite, ...]
    jitted: Callable[..., Any] | None = None
    split: Callable[[Sequence[Any], dict[str, Any]], list[Any]] | None = None
    rebuild: Callable[[Sequence[Any]], tuple[tuple[Any, ...], dict[str, Any]]] | None = None

    def dynamic_leaves(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """The traced leaves of a new set of arguments."""
        if self.split is None:
            raise ValueError("this program cannot take new arguments")
        return self.split(args, kwargs)


@dataclasses.dataclass(frozen=True)
class Inspection:
    """Everything pallaslab learned about a program and its Pallas kernels.

    Attributes:
        name: The traced callable's name (or "cell" for kernels a cell ran).
        args: Shapes and dtypes of the traced arguments.
        outputs: Shapes and dtypes of the results.
        jaxpr: The whole program's jaxpr as text ("" when no call was traced).
        jaxpr_source_map: (jaxpr line, file, source line) entries for `jaxpr`.
        kernels: One record per Pallas kernel found, in program order.
        backend: The JAX backend at hand when inspected ("cpu", "gpu", "tpu").
        result: The run, when the program was run.
        notices: One-line notices about what could not be done and why.
    """

    name: str
    args: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    jaxpr: str
    jaxpr_source_map: tuple[tuple[int, str, int], ...]
    kernels: tuple[Kernel, ...]
    backend: str
    result: RunResult | None = None
    notices: tuple[str, ...] = ()
    _program: Program | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_program(cls, program: Program, notices: tuple[str, ...] = ()) -> Inspection:
        """Builds the records for a traced program."""
        import jax  # noqa: PLC0415 - keeps this module's import light for views' tests

        text, source_map = (
            jax_adapter.jaxpr_text(program.closed_jaxpr)
            if program.closed_jaxpr is not None
            else ("", ())
        )
        kernels = tuple(
            _with_origins(jax_adapter.kernel_from_site(site, k), site, program)
            for k, site in enumerate(program.sites)
        )
        # A bare pallas_call is JAX's inner wrapper; name it after its kernel instead.
        name = kernels[0].name if program.name == "wrapped" and len(kernels) == 1 else program.name
        return cls(
            name=name,
            args=program.args,
            outputs=program.outputs,
            jaxpr=text,
            jaxpr_source_map=source_map,
            kernels=kernels,
            backend=jax.default_backend(),
            notices=notices,
            _program=program,
        )

    @property
    def program(self) -> Program:
        """The traced program (for the core's own use)."""
        if self._program is None:
            raise ValueError("this inspection was built without a program")
        return self._program

    def kernel(self, name_or_index: str | int) -> Kernel:
        """The kernel with this name or index.

        Raises:
            KeyError: If there is no such kernel.
        """
        for k in self.kernels:
            if name_or_index in (k.name, k.index):
                return k
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel {name_or_index!r}; kernels: {names}")

    def tiles(
        self,
        kernel: int | str = 0,
        prefetch: Sequence[Any] | None = None,
        schedule: str | None = None,
    ) -> TileMap:
        """The tile map of a kernel: which block of each operand every program sees.

        Like `kernel.tiles()`, but index maps that read scalar-prefetch values get
        those of the example arguments, and the schedule follows the backend at hand
        when the kernel names none.
        """
        from pallaslab._src.core import tiling  # noqa: PLC0415

        return tiling.tile_map(self, kernel, prefetch, schedule)

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

        Like `kernel.races(backend)`, but index maps that read scalar-prefetch values
        get those of the example arguments (seeded random arrays where only shapes
        were given: the same `Inspection.run()` uses), as `tiles()` does; and outputs
        that programs share in memory (a whole-array or `pl.ANY` ref, each program
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

        return running.run_program(self.program, args, kwargs, ref=ref, check=check)

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
        # The bench layer sits above the core; imported on use only.
        from pallaslab._src.bench.check import check_inspection  # noqa: PLC0415

        return check_inspection(
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

        Returns:
            What was written, and what could not be (`.problems`).

        Example:
            >>> inspection.reproducer("bug.py", save_inputs=True)
            >>> # $ python bug.py  ->  output 0: float32[256, 256] sha256=... equal ...
        """
        from pallaslab._src.core.reproducer import write_reproducer  # noqa: PLC0415

        return write_reproducer(self, path, kernel=kernel, save_inputs=save_inputs, target=target)

    def with_result(self, result: RunResult) -> Inspection:
        """This inspection with a run attached."""
        return dataclasses.replace(self, result=result)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle(self, **kwargs)

    def __repr__(self) -> str:
        kernels = ", ".join(f"{k.name} grid={k.grid}" for k in self.kernels) or "no kernels"
        return f"<Inspection of {self.name}: {kernels}>"


def _with_origins(kernel: Kernel, site: jax_adapter.KernelSite, program: Program) -> Kernel:
    """The kernel with each input passed in unchanged from the program named after it.

    JAX names a pallas_call's operands after its own arguments ("args[0]"); the
    program's argument ("x") is what the user wrote.
    """
    if program.closed_jaxpr is None:
        return kernel
    sources = jax_adapter.program_inputs_of(program.closed_jaxpr, site)
    positions = jax_adapter.kernel_operand_positions(site)
    origin = {
        position: program.args[source].path
        for source, position in zip(sources, positions, strict=True)
        if source is not None and position is not None and source < len(program.args)
    }
    if not origin:
        return kernel
    operands = tuple(
        dataclasses.replace(o, origin=origin[o.position])
        if o.role == "in" and o.position in origin
        else o
        for o in kernel.operands
    )
    return dataclasses.replace(kernel, operands=operands)
