"""What a target's lowering may ask of the program's lowerer, as a protocol.

`engine.Lowerer` is its one implementation; the modules of `targets/` are typed
against this protocol so that they need not import the engine that dispatches to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import jax

    from pallaslab._src.core import jax_adapter
    from pallaslab._src.core.program import Program
    from pallaslab._src.records import Kernel
    from pallaslab._src.records.lowered import GpuResources, Lowered, Stage, TpuResources
    from pallaslab._src.records.targets import Target

T = TypeVar("T")


class LoweringContext(Protocol):
    """The program being lowered, the results shared between targets, and finishing."""

    shared: dict[tuple[Any, ...], Any]

    @property
    def program(self) -> Program:
        """The traced program lowered."""
        ...

    def share(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """`make()` once per key; a failure is remembered and raised again."""
        ...

    def header(self, target: Target, kernel: Kernel | None) -> str:
        """The line saying what made the kernel's (None: the program's) lowering."""
        ...

    def example_avals(self) -> list[jax.ShapeDtypeStruct]:
        """The program's example arguments as shapes and dtypes, to lower it on."""
        ...

    def site(self, kernel: Kernel, chip: str | None) -> jax_adapter.KernelSite:
        """The kernel as bound in the program, traced for `chip` when it is a TPU's."""
        ...

    def payload(
        self,
        kernel: Kernel,
        platform: str,
        *,
        mosaic_gpu: bool | None = None,
        chip: str | None = None,
    ) -> jax_adapter.KernelPayload:
        """The kernel alone lowered for `platform` (and TPU `chip`): its backend's module."""
        ...

    def finish(
        self,
        target: Target,
        kernel: Kernel | None,
        raw: str,
        *,
        language: str | None = None,
        resources: GpuResources | TpuResources | None = None,
        stages: tuple[Stage, ...] = (),
        notes: tuple[str, ...] = (),
        header: str = "",
    ) -> Lowered:
        """A compiler's `raw` text as a `Lowered`: cleaned, linked to the source."""
        ...
