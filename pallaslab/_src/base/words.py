"""How figures and lists read in prose: `48 KiB`, `x_ref, y_ref and o_ref`."""

from __future__ import annotations

from collections.abc import Sequence


def nbytes(count: float) -> str:
    """Bytes in binary units: `48 KiB`, `1.5 MiB`, `-24 KiB` (a change can be negative)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            whole = unit == "B" or abs(value) >= 100
            return f"{value:.0f} {unit}" if whole else f"{value:.3g} {unit}"
        value /= 1024
    return f"{count} B"  # pragma: no cover


def and_list(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
