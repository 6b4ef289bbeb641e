"""How records reach the screen, without any layer below the views importing one.

A record names the view that draws it (`mimebundle("inspection", self)` in its
`_repr_mimebundle_`); the top-level package registers, per view, a function that
imports that view on first use. Without one (a plain Python session, or one layer
under test), records show as their text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Renderer = Callable[..., dict[str, Any] | None]

_renderers: dict[str, Renderer] = {}


def register_renderer(view: str, renderer: Renderer) -> None:
    """Sets the function that turns records shown by `view` into a Jupyter mime bundle."""
    _renderers[view] = renderer


def mimebundle(view: str, record: Any, **kwargs: Any) -> dict[str, Any] | None:
    """The mime bundle `view`'s renderer makes of `record`; None (plain repr) without one."""
    renderer = _renderers.get(view)
    if renderer is None:
        return None
    return renderer(record, **kwargs)
