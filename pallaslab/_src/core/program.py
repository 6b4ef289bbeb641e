"""A traced program as the core holds it, and the records made of it.

`Program` holds JAX objects (the closed jaxpr, the kernels as bound, the callables
that rebuild a call) and never leaves the core. `Traced` is what tracing found, as
records (the jaxpr's text, one `Kernel` per kernel), with the program kept privately:
every core operation (running, tile maps, lowering, hints, reproducers ...) takes a
`Traced`, and `Inspection` (`core/inspection.py`) adds those operations as methods.
Layers above the core read records only; what they need of the program itself is a
function of `core/programs.py`.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Self

from pallaslab._src.base import sources
from pallaslab._src.core import chips, jax_adapter, snapshot
from pallaslab._src.records import ArraySpec, Kernel, RunResult


@dataclasses.dataclass(frozen=True)
class Program:
    """A traced program (JAX objects inside; never shown).

    Attributes:
        name: The traced callable's name.
        flat_fn: The callable over the traced (array) leaves only.
        closed_jaxpr: The program's closed jaxpr; None for kernels recorded while a
            cell ran, where no single program was traced.
        args: The traced leaves' shapes and dtypes.
        outputs: The results' shapes and dtypes.
        example_args: The example leaves (arrays or ShapeDtypeStructs); an array of
            `WEAK_BYTES` or more is a ShapeDtypeStruct here, the array itself held
            weakly in `weak_args` (read them with `examples()`).
        sites: The kernels as bound in the program.
        jitted: `jax.jit(flat_fn)`, made once so reruns hit JAX's compile cache.
        split: Takes (args, kwargs) laid out as for the traced callable and returns
            the leaves that are traced.
        rebuild: Takes the traced leaves and returns (args, kwargs) for the callable.
        fn: The callable as given (static arguments not yet bound).
        retrace_fn: Like `flat_fn`, but always traces `fn` again, with the globals it
            read pinned as they were when it was traced (`core/snapshot.py`): for
            what the jaxpr cannot serve (another TPU chip). `flat_fn` replays the
            traced jaxpr on the traced shapes and dtypes, and re-traces so on others.
        pins: Those globals.
        chip: The chips its kernels' device queries answered for while it was traced
            (runs and lowerings answer the same).
        notices: What JAX said of the code while it traced (deprecations), a line each.
        weak_args: Per example leaf, a weak reference to the array it stands for
            (None where `example_args` holds the leaf itself). The records made of
            the program (`Traced`) hold those arrays; a view's copy of the records does
            not, so a displayed inspector keeps no large array alive.
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
    fn: Callable[..., Any] | None = None
    retrace_fn: Callable[..., Any] | None = None
    pins: snapshot.Pins | None = None
    chip: chips.ChipChoice = dataclasses.field(default_factory=chips.ChipChoice)
    notices: tuple[str, ...] = ()
    weak_args: tuple[weakref.ref[Any] | None, ...] = ()

    @property
    def lowering_fn(self) -> Callable[..., Any] | None:
        """`fn` to lower for another platform or chip: traced again, globals pinned.

        Not the replay of `flat_fn`: a replayed jaxpr keeps the trace context it was
        traced in (a nested `jax.jit` its own abstract mesh), so the abstract GPU or TPU
        device a cross-platform lowering sets would not reach its kernels (jax 0.11+:
        "No supported GPU devices found").
        """
        return self.retrace_fn or self.flat_fn

    def examples(self) -> list[Any]:
        """The example leaves: arrays where still alive, else their shapes and dtypes.

        An array gone (its records and the user's names dropped it) reads as a
        ShapeDtypeStruct, which runs and checks fill with seeded data, as for shapes.
        """
        if not self.weak_args:
            return list(self.example_args)
        found = []
        for leaf, ref in zip(self.example_args, self.weak_args, strict=True):
            alive = ref() if ref is not None else None
            found.append(leaf if alive is None else alive)
        return found

    def strong_examples(self) -> tuple[Any, ...]:
        """The weakly held example arrays still alive (for records to hold them)."""
        return tuple(a for ref in self.weak_args if ref is not None and (a := ref()) is not None)

    def dynamic_leaves(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """The traced leaves of a new set of arguments."""
        if self.split is None:
            raise ValueError("this program cannot take new arguments")
        return self.split(args, kwargs)

    def leaves_of(self, args: Sequence[Any], kwargs: dict[str, Any] | None) -> list[Any]:
        """The traced leaves of `args`/`kwargs`; the examples when both are empty."""
        if args or kwargs:
            return self.dynamic_leaves(args, dict(kwargs or {}))
        return self.examples()


#: Example arrays this large or larger are held weakly by the program (see `Program`).
WEAK_BYTES = 1 << 20


def held_weakly(
    leaves: Sequence[Any],
) -> tuple[tuple[Any, ...], tuple[weakref.ref[Any] | None, ...]]:
    """`Program.example_args` and `Program.weak_args` for these example leaves."""
    import jax  # noqa: PLC0415 - keeps this module's import light for views' tests

    placeholders: list[Any] = []
    refs: list[weakref.ref[Any] | None] = []
    for leaf in leaves:
        size = getattr(leaf, "nbytes", 0)
        try:
            ref = weakref.ref(leaf) if isinstance(size, int) and size >= WEAK_BYTES else None
        except TypeError:  # not weakly referable: held as it is
            ref = None
        refs.append(ref)
        placeholders.append(leaf if ref is None else jax.ShapeDtypeStruct(leaf.shape, leaf.dtype))
    if all(ref is None for ref in refs):
        return tuple(leaves), ()
    return tuple(placeholders), tuple(refs)


@dataclasses.dataclass(frozen=True)
class Traced:
    """Everything pallaslab learned about a program and its Pallas kernels, as records.

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
        source_texts: (file, lines) of every source file the records point at, as
            they were when traced: views show these, not what the file (or a cell
            run since) holds later.
        chip: The GPU or TPU the kernels were traced for ("H100", "v5e"; "" when none
            is assumed: no kernel asks for one).
        chip_note: Why that chip ("chosen", "the GPU here", "the default without a
            GPU" ...).
        not_run: Why there is no `result` ("" when nothing is said: not asked).
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
    source_texts: tuple[tuple[str, tuple[str, ...]], ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )
    chip: str = ""
    chip_note: str = ""
    not_run: str = ""
    _program: Program | None = dataclasses.field(default=None, compare=False, repr=False)
    # The program's weakly held example arrays, held here (`for_view` lets go of them).
    _held: tuple[Any, ...] = dataclasses.field(default=(), compare=False, repr=False)

    @classmethod
    def from_program(cls, program: Program, notices: tuple[str, ...] = ()) -> Self:
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
        chip, chip_note = chips.traced_for(program.chip, [k.backend for k in kernels])
        notices = (*notices, *program.notices, *_deprecated_backends(kernels))
        return cls(
            name=name,
            args=program.args,
            outputs=program.outputs,
            jaxpr=text,
            jaxpr_source_map=source_map,
            kernels=kernels,
            backend=jax.default_backend(),
            notices=notices,
            source_texts=source_snapshot(text_files(kernels, source_map)),
            chip=chip,
            chip_note=chip_note,
            _program=program,
            _held=program.strong_examples(),
        )

    def source_lines(self, file: str) -> list[str]:
        """A source file's lines as they were when traced (as they are now, if not kept)."""
        for name, lines in self.source_texts:
            if name == file:
                return list(lines)
        return sources.lines(file)

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

    def with_result(self, result: RunResult) -> Self:
        """This inspection with a run attached."""
        return dataclasses.replace(self, result=result)

    def for_view(self) -> Self:
        """These records as a view keeps them: no large array held.

        The run's output and reference arrays are left out (views show their
        summaries), and the example arguments are held only weakly: while this
        inspection (or the user's own names) holds them, the view's operations use
        them; after, they use seeded data of the same shapes.
        """
        result = self.result
        if result is not None and (result.values or result.expected):
            result = dataclasses.replace(result, values=(), expected=())
        return dataclasses.replace(self, result=result, _held=())

    def __reduce__(self) -> tuple[Any, ...]:
        # The records pickle; the traced program (JAX objects, the user's functions)
        # does not: an unpickled inspection says what needs it ("built without a
        # program").
        return _rebuild, (type(self), self._record_fields())

    def __copy__(self) -> Self:
        return dataclasses.replace(self)  # the program and what it holds, shared

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        # The records are copied; the traced program (immutable JAX objects) is shared.
        fields = copy.deepcopy(self._record_fields(), memo)
        return type(self)(**fields, _program=self._program, _held=self._held)

    def _record_fields(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("_program", "_held")
        }


def _rebuild(cls: type[Traced], fields: dict[str, Any]) -> Traced:
    return cls(**fields)


def text_files(
    kernels: Sequence[Kernel], program_map: Sequence[tuple[int, str, int]] = ()
) -> list[str]:
    """The files kernel records point at: bodies, calls, index maps, jaxpr lines."""
    files: list[str] = [file for _, file, _ in program_map]
    for kernel in kernels:
        files += [loc.file for loc in (kernel.source, kernel.call_site) if loc is not None]
        files += [o.index_map.source_file for o in kernel.operands if o.index_map is not None]
        files += [file for _, file, _ in kernel.jaxpr_source_map]
    return [f for f in dict.fromkeys(files) if f]


def source_snapshot(files: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(file, lines) of each file that has source and is no one's internals, now."""
    found = []
    for file in files:
        if sources.is_internal_file(file):
            continue
        lines = sources.lines(file)
        if lines:
            found.append((file, tuple(lines)))
    return tuple(found)


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


def _deprecated_backends(kernels: Sequence[Kernel]) -> list[str]:
    """A notice per kernel on Pallas' Triton backend, where this JAX deprecates it."""
    deprecated = jax_adapter.triton_deprecation()
    if not deprecated:
        return []
    return [
        f"{k.name}: {deprecated} Its Mosaic GPU equivalent: plgpu.kernel (or pl.kernel on a "
        "plgpu.Mesh) with plgpu.emit_pipeline, plgpu.BlockSpec and TMA copies; the "
        "mosaic-gpu and xla-gpu:<chip> targets lower it."
        for k in kernels
        if k.backend == "triton"
    ]


def program_of(traced: Traced) -> Program | None:
    """The traced program behind the records (None for records built by hand)."""
    return traced._program  # noqa: SLF001 - the core's own handle


def require_program(traced: Traced, doing: str = "do this") -> Program:
    """The traced program; ValueError when the records were built without one.

    Args:
        traced: The records.
        doing: What needs the program, for the message ("lower it").
    """
    program = program_of(traced)
    if program is None:
        raise ValueError(f"this inspection was built without a program: cannot {doing}")
    return program


def require_call(traced: Traced, doing: str = "do this") -> Program:
    """The traced program of one call; ValueError when no single call was traced.

    Kernels recorded while a cell ran have a program (their sites) but no call to
    run, check or rebuild.
    """
    program = require_program(traced, doing)
    if program.flat_fn is None or program.rebuild is None or program.split is None:
        raise ValueError(f"no single program was traced; name a call to {doing}")
    return program
