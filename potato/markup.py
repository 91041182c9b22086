"""The one way HTML is built: ``render`` escapes every interpolated value unless it is
``Safe`` (markup made by ``render`` itself). A leaf module outside ``potato.server``, so that
the annotation kinds (``potato.schemes``, read by the config) build their fields with it
without importing the server."""

from __future__ import annotations

import html
import math
from typing import Any


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


class Safe(str):
    """HTML built by ``render`` (or a constant reviewed as markup): inserted as it is."""


def _field(value: Any) -> Any:
    if isinstance(value, Safe):
        return value
    if isinstance(value, bool) or value is None:
        return esc("" if value is None else value)
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else 0  # numbers keep their format specs
    return esc(value)


def render(template: str, **values: Any) -> Safe:
    """The one way pages are built: ``template.format(**values)`` where every value is escaped
    unless it is ``Safe`` (made by ``render`` itself); numbers must be finite."""
    return Safe(template.format(**{k: _field(v) for k, v in values.items()}))


def join(parts) -> Safe:
    """Several Safe fragments as one."""
    return Safe("".join(p if isinstance(p, Safe) else esc(p) for p in parts))
