"""What the emulator is asked to do: the request, its notice, and a kernel's key."""

from __future__ import annotations

import dataclasses
from typing import Literal

from pallaslab._src.records import Kernel

Mode = Literal["emulate", "interpret"]


class EmulationNotice(UserWarning):
    """A kernel ran in Pallas' interpreter instead of the emulator (says why)."""


@dataclasses.dataclass(frozen=True)
class Request:
    """What the emulator is asked to do while a program is traced.

    Hashable: it is part of JAX's compile-cache key.

    Attributes:
        mode: "emulate", or "interpret" to force Pallas' own interpreter.
        order: "" for the grid's order (batched where safe); "gpu" or "tpu" to run the
            targeted kernel's programs in a seeded order those rules allow.
        seed: Seed of that order.
        lanes: Programs per wave in that order: each wave's programs read the state
            as it was before the wave, as concurrent programs would.
        target: The kernel the order applies to (`kernel_key`); "" for all.
    """

    mode: Mode = "emulate"
    order: str = ""
    seed: int = 0
    lanes: int = 0
    target: str = ""

    def applies_to(self, key: str) -> bool:
        """Whether the order applies to the kernel with this key."""
        return not self.target or self.target == key


EMULATE = Request()
INTERPRET = Request(mode="interpret")


def kernel_key(kernel: Kernel) -> str:
    """Identifies a kernel across traces: name, grid, definition site, operand types."""
    where = f"{kernel.source.file}:{kernel.source.line}" if kernel.source else ""
    operands = ";".join(f"{o.dtype}{list(o.shape)}" for o in kernel.operands)
    return f"{kernel.name}|{list(kernel.grid)}|{where}|{operands}"
