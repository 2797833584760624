"""``require``: import an optional dependency, or say which extra installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import MissingExtra

__all__ = ["MissingExtra", "require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtra` naming ``pip install 'stoker[extra]'``.

    Example:
        >>> require("json", "none").__name__
        'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtra(
            f"this source needs the {top!r} package: pip install 'stoker[{extra}]'"
        ) from exc
