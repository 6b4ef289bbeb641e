"""Reading static pages in tests: their text, and the pictures they embed."""

from __future__ import annotations

import base64
import html
import re

_PICTURE = re.compile(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"')


def pictures(page: str) -> list[str]:
    """The SVG pictures of a static page: its `<img>` data URIs, decoded."""
    return [base64.b64decode(data).decode() for data in _PICTURE.findall(page)]


def text_of(page: str) -> str:
    """The text a page shows (highlighted tokens sit in separate spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))
