"""Marks that stages and functions carry, shared by every stage (imports nothing of stoker).

``releases_gil`` marks a function whose work releases the GIL; a node's
``releases_gil`` property asks :func:`is_marked` about the function it runs.
``builds_operation`` marks a factory of record operations (``sk.vision.normalize``),
which ``map`` refuses as a function, saying how it is used.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["builds_operation", "factory_usage", "is_marked", "releases_gil"]

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__stoker_releases_gil__"
_FACTORY = "__stoker_builds_operation__"


def releases_gil(fn: F) -> F:
    """Mark ``fn`` as spending its time with the GIL released (I/O, decoding, NumPy).

    With ``worker_mode="auto"`` a pipeline whose functions are all marked runs on
    thread workers, which start in microseconds and share memory; otherwise it runs
    on process workers. The mark changes nothing else.

    Example:
        >>> import stoker as sk
        >>> @sk.releases_gil
        ... def read(path):
        ...     with open(path, "rb") as f:
        ...         return f.read()
        >>> sk.range(3).map(read).releases_gil  # so auto picks threads for it
        True
        >>> sk.releases_gil(len) is not len  # builtins are wrapped, not changed
        True
    """
    try:
        setattr(fn, _MARK, True)
        return fn
    except (AttributeError, TypeError):
        pass

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(marked, _MARK, True)
    return marked  # type: ignore[return-value]


def is_marked(fn: object) -> bool:
    """True when ``fn`` (or the function a ``functools.partial`` wraps) was marked
    with :func:`releases_gil`.

    Example:
        >>> import functools
        >>> is_marked(functools.partial(releases_gil(lambda x, y: x), 1)), is_marked(print)
        (True, False)
    """
    while isinstance(fn, functools.partial):
        if getattr(fn, _MARK, False):
            return True
        fn = fn.func
    return bool(getattr(fn, _MARK, False))


def builds_operation(usage: str) -> Callable[[F], F]:
    """Mark a function that builds an operation (to be called first, then mapped).

    ``usage`` shows the right call, e.g. ``"ds.map(sk.vision.normalize())"``;
    ``map`` and ``filter`` given the factory itself raise a ``TypeError`` that
    shows it.

    Example:
        >>> @builds_operation("ds.map(scale(2))")
        ... def scale(k):
        ...     return lambda x: x * k
        >>> factory_usage(scale)
        'ds.map(scale(2))'
    """

    def mark(fn: F) -> F:
        setattr(fn, _FACTORY, usage)
        return fn

    return mark


def factory_usage(fn: object) -> str | None:
    """The ``usage`` a :func:`builds_operation` factory was marked with; None otherwise."""
    usage = getattr(fn, _FACTORY, None)
    return usage if isinstance(usage, str) else None
