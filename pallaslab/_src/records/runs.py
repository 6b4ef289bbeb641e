"""Records of a run: output summaries, comparisons with a reference, and findings.

Leaks, out-of-bounds accesses and confirmed races, as the emulator's checks report
them; plain Python and NumPy values.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pallaslab._src.records.kernels import SourceLocation


@dataclasses.dataclass(frozen=True)
class OutputSummary:
    """What one output of a run looks like.

    Attributes:
        path: Where the output sits among the results ("[0]", "out").
        shape: Its shape.
        dtype: Its dtype's name.
        preview: A few leading values, as text.
        nan_count: How many elements are NaN.
        inf_count: How many elements are infinite.
        min: Smallest finite value (None when there is none).
        max: Largest finite value (None when there is none).
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    preview: str
    nan_count: int = 0
    inf_count: int = 0
    min: float | None = None
    max: float | None = None


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How a run's outputs compare with a reference.

    Attributes:
        ok: Whether every output matches within tolerance (and shapes and dtypes agree).
        max_abs_err: Largest absolute difference over all outputs.
        max_rel_err: Largest difference relative to the reference's magnitude.
        rtol: Relative tolerance used (fit for the dtype).
        atol: Absolute tolerance used.
        mismatched: Elements outside tolerance, over all outputs.
        problem: Why the outputs could not be compared element by element ("" if they
            could): a shape, dtype or structure mismatch.
        tiles: Per output, where it differs from the reference, block by block (filled
            in by `Inspection.check` and `%%kernel --ref`; empty otherwise).
    """

    ok: bool
    max_abs_err: float
    max_rel_err: float
    rtol: float
    atol: float
    mismatched: int = 0
    problem: str = ""
    tiles: tuple[TileMismatch, ...] = ()


@dataclasses.dataclass(frozen=True)
class TileMismatch:
    """Where one output differs from its reference, counted per output block.

    The output is cut into tiles of the kernel's output block shape (a squeezed
    dimension counts 1), so tile `(i, j)` is the block the index map names `(i, j)`.

    Attributes:
        output: Where the output sits among the results ("[0]", "out").
        shape: The output's shape.
        tile_shape: The block shape used to cut it into tiles.
        counts: Elements outside tolerance, per tile (int64, one axis per dimension).
        nonfinite: Elements that are NaN or Inf in the output where the reference is
            finite, per tile (int64, same shape as `counts`).
        bad_tiles: Indices of the tiles that differ, in order.
        bad_programs: Grid indices of the programs whose output block differs (empty
            when the index map could not be evaluated).
        kernel: The kernel that writes this output ("" when none writes it directly).
        operand: That kernel's output operand ("o_ref").
        grid: That kernel's grid.
        nan_count: NaN elements in the output where the reference has none.
        inf_count: Infinite elements in the output where the reference is finite.
        reference_nonfinite: NaN or Inf elements in the reference itself.
        pattern: The mismatch in words ("the last row of blocks", "block (3, 1)").
        note: What could not be worked out, and why ("" when all was).
    """

    output: str
    shape: tuple[int, ...]
    tile_shape: tuple[int, ...]
    counts: np.ndarray = dataclasses.field(compare=False, repr=False)
    nonfinite: np.ndarray = dataclasses.field(compare=False, repr=False)
    bad_tiles: tuple[tuple[int, ...], ...] = ()
    bad_programs: tuple[tuple[int, ...], ...] = ()
    kernel: str = ""
    operand: str = ""
    grid: tuple[int, ...] = ()
    nan_count: int = 0
    inf_count: int = 0
    reference_nonfinite: int = 0
    pattern: str = ""
    note: str = ""

    @property
    def tiles(self) -> tuple[int, ...]:
        """How many tiles along each dimension."""
        return tuple(self.counts.shape)

    @property
    def ok(self) -> bool:
        """Whether every tile matches."""
        return not self.bad_tiles


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run of a program.

    Attributes:
        backend: The JAX backend it ran on ("cpu", "gpu", "tpu").
        mode: "compiled"; "emulated" when pallaslab's emulator ran the kernels;
            "interpret" when they ran in Pallas' interpreter; "mosaic-gpu-interpret"
            when they are Mosaic GPU kernels that JAX's Mosaic GPU interpreter ran on
            the CPU; "emulated+interpret" when kernels ran in several of these ways
            (`notices` says how each did).
        outputs: A summary of each output.
        seconds: Wall time of the run, compile included.
        comparison: Against the reference, when one was given.
        values: The outputs as NumPy arrays (not compared, not shown in reprs).
        expected: The reference's outputs as NumPy arrays, when a reference was
            given (kept so mismatches can be located block by block).
        notices: One line per kernel on how it ran (batched and sequential grid axes,
            or why it needed Pallas' interpreter), and what could not be checked.
        leaks: Output tiles that depend on padding or never-written memory (checking
            mode), empty when none do or no check ran.
        race_checks: Races found by running kernels in other orders their backends
            allow, for kernels whose geometry shows conflicts.
        seeded_inputs: The arguments (their paths) that were given as shapes and ran
            on seeded random data.
        out_of_bounds: Loads and stores that reached outside their block or array in
            some program (checking mode, or JAX's Mosaic GPU interpreter), empty when
            none did or no check ran.
        interpreter_races: Races JAX's Mosaic GPU interpreter found while it ran
            (unordered accesses of one buffer, at their source lines).
    """

    backend: str
    mode: str
    outputs: tuple[OutputSummary, ...]
    seconds: float
    comparison: Comparison | None = None
    values: tuple[np.ndarray, ...] = dataclasses.field(default=(), compare=False, repr=False)
    expected: tuple[np.ndarray, ...] = dataclasses.field(default=(), compare=False, repr=False)
    notices: tuple[str, ...] = ()
    leaks: tuple[Leak, ...] = ()
    race_checks: tuple[RaceCheck, ...] = ()
    seeded_inputs: tuple[str, ...] = ()
    out_of_bounds: tuple[OutOfBounds, ...] = ()
    interpreter_races: tuple[InterpreterRace, ...] = ()


@dataclasses.dataclass(frozen=True)
class Leak:
    """Output tiles whose values depend on padding or on memory nothing wrote.

    Found by running the kernel twice (emulated): once as Pallas' interpreter does,
    with padding and unwritten buffers holding NaN (integers: their smallest value),
    and once with them holding an ordinary value. Tiles whose values differ read them.

    Attributes:
        kernel: The kernel's name.
        kernel_index: Its index in the program.
        output: The output whose tiles are affected (its parameter name).
        source: The operand whose padding or initial contents leak.
        cause: "padding" (an input's edge-block padding), "never-written" (output
            elements no program writes), "uninitialized-output" (an output block read
            before it is written), "uninitialized-scratch" (a scratch buffer read
            before it is written) or "masked-load-without-other" (the lanes a masked
            load without `other=` turns off: undefined on a GPU).
        tiles: The affected tiles of the output: block indices in its block grid.
        elements: Affected output elements.
        nan_elements: Of those, how many are NaN in the run (as interpret mode gives).
        location: Where the leak is best fixed: the source operand's BlockSpec (index
            map) for padding and never-written elements, the load for masked loads,
            else the kernel.
        programs: Programs that write the first affected tiles.
        detail: Where the padding or unwritten memory is, in words.
    """

    kernel: str
    kernel_index: int
    output: str
    source: str
    cause: str
    tiles: tuple[tuple[int, ...], ...]
    elements: int
    nan_elements: int
    location: SourceLocation | None
    programs: tuple[tuple[int, ...], ...] = ()
    detail: str = ""

    def describe(self, with_location: bool = True) -> str:
        """One sentence: which tiles, from what (and where to look)."""
        shown = ", ".join(_tuple_text(t) for t in self.tiles[:4])
        more = f" and {len(self.tiles) - 4} more" if len(self.tiles) > 4 else ""
        plural = "s" if len(self.tiles) != 1 else ""
        verb = "depend" if plural else "depends"
        what = {
            "padding": f"the padding of {self.source}'s edge blocks",
            "never-written": "elements no program writes",
            "uninitialized-output": f"{self.source} as it was before any program wrote it",
            "uninitialized-scratch": f"scratch buffer {self.source} before it is written",
            "masked-load-without-other": (
                f"the lanes a masked load from {self.source} turns off (it has no other=)"
            ),
        }.get(self.cause, self.source)
        nan = f", {self.nan_elements} of them NaN" if self.nan_elements else ""
        where = f" ({self.location})" if self.location and with_location else ""
        detail = f" {self.detail}" if self.detail else ""
        return (
            f"{self.kernel}: tile{plural} {shown}{more} of {self.output} {verb} on {what}: "
            f"{self.elements} element(s){nan}.{detail}{where}"
        )


@dataclasses.dataclass(frozen=True)
class OutOfBounds:
    """Loads or stores of one source line that reach outside their ref, in some programs.

    Found by running the kernel's body instrumented (emulated): every program, every
    load and store, lane by lane.

    Attributes:
        kernel: The kernel's name.
        kernel_index: Its index in the program.
        ref: The ref accessed (its parameter name; "a scoped buffer" for
            `pl.run_scoped` ones).
        access: "load", "store", "update" (`+=`) or "atomic".
        cause: "clamped-slice": a slice or index computed while the kernel runs
            reaches outside the ref; JAX clamps it to fit, so Pallas' interpreter and
            the emulator read or write other elements than asked, and a GPU or TPU
            reads or writes out of bounds. "copy-window": a Mosaic GPU copy's GMEM
            window (TMA, or a GMEM ref read or written whole) reaches past its array in
            some CTAs; the interpreter clamps it, a GPU's TMA clips it.
            "masked-lanes-outside": a masked load or store has lanes enabled outside
            the ref. "interpreter": JAX's Mosaic GPU interpreter stopped the access (a
            read then reads NaN; a write stops the run); "tpu-interpreter": Pallas'
            TPU interpreter did.
        shape: The ref's shape (the block a program sees).
        span: For the first program that does it, per dimension the first and last
            element its (enabled) lanes reach.
        programs: The first programs that do it, in grid order.
        program_count: How many programs do it.
        location: The load's or store's source line.
    """

    kernel: str
    kernel_index: int
    ref: str
    access: str
    cause: str
    shape: tuple[int, ...]
    span: tuple[tuple[int, int], ...]
    programs: tuple[tuple[int, ...], ...]
    program_count: int
    location: SourceLocation | None = None

    def describe(self, with_location: bool = True) -> str:
        """One sentence: which access, where it reaches, in which programs, and why."""
        verb = {"load": "load from", "store": "store into", "update": "update of"}.get(
            self.access, f"{self.access} on"
        )
        reach = "; ".join(
            f"{lo}..{hi}" + (f" of dimension {d}" if len(self.span) > 1 else "")
            for d, (lo, hi) in enumerate(self.span)
        )
        size = "x".join(str(n) for n in self.shape) or "a scalar"
        shown = ", ".join(_tuple_text(p) for p in self.programs[:4])
        more = f" and {self.program_count - 4} more" if self.program_count > 4 else ""
        programs = f"program{'s' if self.program_count != 1 else ''} {shown}{more}"
        why = (
            "JAX clamps a slice computed at run time to fit, so the emulator and Pallas' "
            "interpreter used other elements than the kernel asked for; a GPU or TPU "
            "would go out of bounds. Check the pl.ds start (an offset into the block, "
            "not into the array) and its size."
            if self.cause == "clamped-slice"
            else "JAX clamps a copy's window computed at run time to fit, so JAX's Mosaic GPU "
            "interpreter copied other elements than the kernel asked for; a GPU's TMA unit "
            "drops the elements outside (a store) or reads them as zeros (a load). Check "
            "the window's start and size against the array."
            if self.cause == "copy-window"
            else "Lanes the mask enables lie outside it: check the mask against the block's size."
        )
        where = f" ({self.location})" if self.location and with_location else ""
        if self.cause in ("interpreter", "tpu-interpreter"):
            result = (
                "the elements outside read as NaN in this run"
                if self.access == "load"
                else "the run stopped there"
            )
            who, chip = (
                ("JAX's Mosaic GPU interpreter", "GPU")
                if self.cause == "interpreter"
                else ("Pallas' TPU interpreter", "TPU")
            )
            return (
                f"{self.kernel}: a {verb} {self.ref} reaches elements {reach}, outside "
                f"{self.ref} ({size}): {who} stopped it ({result}); "
                f"a {chip} would read or write other memory.{where}"
            )
        return (
            f"{self.kernel}: a {verb} {self.ref} reaches elements {reach}, outside "
            f"{self.ref} ({size}), in {programs}.{where} {why}"
        )


@dataclasses.dataclass(frozen=True)
class RaceCheck:
    """A kernel run in other orders its backend allows, against the grid's order.

    Attributes:
        kernel: The kernel's name.
        kernel_index: Its index in the program.
        backend: "gpu" or "tpu": whose rules chose the orders.
        conflicts: Blocks whose writers conflict under those rules (geometry).
        orders: Seeded orders run.
        confirmed: Whether some order changed the outputs.
        tiles: (output, tile) pairs whose values changed, first few.
        max_abs_diff: Largest change of any output element (inf when NaN appeared).
        seeds: The seeds of the orders run.
        writes_agree: Whether the conflicting programs write the same values to the
            elements they share (True: benign, wasted work; False: they write
            different values, so the result depends on which runs last); None when
            not compared (a program reads what another stores, or too large).
    """

    kernel: str
    kernel_index: int
    backend: str
    conflicts: int
    orders: int
    confirmed: bool
    tiles: tuple[tuple[str, tuple[int, ...]], ...] = ()
    max_abs_diff: float = 0.0
    seeds: tuple[int, ...] = ()
    writes_agree: bool | None = None

    @property
    def races(self) -> bool:
        """Whether this is a race: other orders changed the result, or writes differ."""
        return self.confirmed or self.writes_agree is False

    def describe(self) -> str:
        """One sentence: what running in other orders showed."""
        label = self.backend.upper()
        if not self.orders:
            return f"{self.kernel}: no {label} conflicts to confirm."
        if self.writes_agree and not self.confirmed:
            return (
                f"{self.kernel}: the programs that write the same elements under {label} "
                "rules all write the same values there: a benign race (whichever runs "
                "last, the result is the same), but wasted work."
            )
        if not self.confirmed and self.writes_agree is False:
            return (
                f"{self.kernel}: race: the programs that write the same elements under "
                f"{label} rules write different values there, so the result depends on "
                f"which runs last ({self.orders} seeded order(s) happened to keep the grid "
                "order's result on this input)."
            )
        if not self.confirmed:
            return (
                f"{self.kernel}: {self.orders} seeded {label} order(s) gave the same "
                "outputs as the grid's order (the conflicts did not change this input's "
                "result)."
            )
        shown = ", ".join(f"{o} {_tuple_text(t)}" for o, t in self.tiles[:4])
        more = f" and {len(self.tiles) - 4} more" if len(self.tiles) > 4 else ""
        change = (
            "NaN appeared"
            if math.isinf(self.max_abs_diff)
            else f"largest change {self.max_abs_diff:.4g}"
        )
        return (
            f"{self.kernel}: race confirmed: running its programs in {self.orders} seeded "
            f"order(s) that {label} rules allow changed tiles {shown}{more} ({change})."
        )


@dataclasses.dataclass(frozen=True)
class InterpreterRace:
    """Two accesses of one buffer that JAX's Mosaic GPU interpreter found unordered.

    Its race detector keeps a vector clock per thread (warpgroup), TMA unit and
    barrier: a write and another access of the same elements with neither ordered
    before the other (no barrier, no wait between them) is a race.

    Attributes:
        kernel: The kernel's name.
        kernel_index: Its index in the program.
        memory: The buffer's memory space ("SMEM", "GMEM", "TMEM"; "" if not said).
        accesses: The two accesses, "write" or "read" each (the later one first).
        threads: Who made each ("thread 1", "warpgroup 1 of block 0").
        location: The source line of the first access.
        other_location: The source line of the second.
        count: How many times the interpreter reported this pair of lines.
    """

    kernel: str
    kernel_index: int
    memory: str
    accesses: tuple[str, str]
    threads: tuple[str, str]
    location: SourceLocation | None
    other_location: SourceLocation | None
    count: int = 1

    def describe(self, with_location: bool = True) -> str:
        """One sentence: what raced with what, where."""

        def side(k: int, at: SourceLocation | None) -> str:
            line = f" at line {at.line}" if at is not None else ""
            return f"a {self.accesses[k]} by {self.threads[k]}{line}"

        memory = f" {self.memory}" if self.memory else ""
        times = f" (reported {self.count} times)" if self.count > 1 else ""
        where = f" ({self.location})" if self.location and with_location else ""
        return (
            f"{self.kernel}: race on a{memory} buffer: {side(0, self.location)} and "
            f"{side(1, self.other_location)} are not ordered (no barrier or wait between "
            f"them), so the result depends on timing{times}.{where}"
        )


def _tuple_text(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
