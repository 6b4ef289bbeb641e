"""How records reach the screen, without the core importing any view.

The core knows nothing of widgets. The top-level package registers the inspector
here; `Inspection._repr_mimebundle_` asks this registry, and falls back to text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_renderer: Callable[..., dict[str, Any] | None] | None = None


def register_renderer(renderer: Callable[..., dict[str, Any] | None]) -> None:
    """Sets the function that turns a record into a Jupyter mime bundle."""
    global _renderer  # noqa: PLW0603
    _renderer = renderer


def mimebundle(record: Any, **kwargs: Any) -> dict[str, Any] | None:
    """The registered renderer's mime bundle for `record`, or None (plain repr)."""
    if _renderer is None:
        return None
    return _renderer(record, **kwargs)
