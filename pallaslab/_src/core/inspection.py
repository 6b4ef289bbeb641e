"""The result of inspecting a program: records, plus a handle to rerun it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from pallaslab._src.core import display, jax_adapter
from pallaslab._src.records import ArraySpec, Kernel, RunResult


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
            jax_adapter.kernel_from_site(site, k) for k, site in enumerate(program.sites)
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

    def with_result(self, result: RunResult) -> Inspection:
        """This inspection with a run attached."""
        return dataclasses.replace(self, result=result)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle(self, **kwargs)

    def __repr__(self) -> str:
        kernels = ", ".join(f"{k.name} grid={k.grid}" for k in self.kernels) or "no kernels"
        return f"<Inspection of {self.name}: {kernels}>"
