"""Marks that stages and functions carry, shared by every stage (imports nothing of stoker).

``releases_gil`` marks a function whose work releases the GIL; a node's
``releases_gil`` property asks :func:`is_marked` about the function it runs.
``shares_process`` marks a function that is safe to run in the training process
(it cannot crash it); a node's ``shares_process`` property asks :func:`may_share`.
A function that releases the GIL runs on thread workers, so that mark implies this one.

``builds_operation`` marks a factory of record operations (``sk.vision.normalize``),
which ``map`` refuses as a function, saying how it is used.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "builds_operation",
    "factory_usage",
    "is_marked",
    "may_share",
    "releases_gil",
    "shares_process",
]

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__stoker_releases_gil__"
_FACTORY = "__stoker_builds_operation__"
_SHARES = "__stoker_shares_process__"


def releases_gil(fn: F) -> F:
    """Mark ``fn`` as spending its time with the GIL released (I/O, decoding, NumPy).

    With ``worker_mode="auto"`` a pipeline whose functions are all marked runs on
    thread workers, which start in microseconds and share memory; otherwise it runs
    on process workers. It implies :func:`shares_process`: mark only code that cannot
    crash the training process. The mark changes nothing else.

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
    return _mark(fn, _MARK)


def shares_process(fn: F) -> F:
    """Mark ``fn`` as safe to run in the training process: it cannot crash it.

    With ``num_workers > 0`` and ``worker_mode="auto"``, user code runs in worker
    processes unless it is marked, so that a native crash (a segfault in a decoder)
    is a :class:`~stoker.WorkerCrashed` naming the record, never the end of the
    training run. A pipeline whose functions all carry this mark (or
    :func:`releases_gil`, which implies it) may instead start on thread workers and
    build its batches on the caller's thread when handing them over costs more than
    building them (tiny records). Mark pure Python, or native code you trust; the
    mark changes nothing else: batches and states are the same either way.

    Example:
        >>> import stoker as sk
        >>> @sk.shares_process
        ... def parse(line):
        ...     return int(line)
        >>> sk.range(3).map(parse).shares_process, sk.range(3).map(parse).releases_gil
        (True, False)
        >>> sk.range(3).map(str).shares_process  # unmarked: isolated in processes
        False
    """
    return _mark(fn, _SHARES)


def _mark(fn: F, mark: str) -> F:
    try:
        setattr(fn, mark, True)
        return fn
    except (AttributeError, TypeError):
        pass

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(marked, mark, True)
    return marked  # type: ignore[return-value]


def is_marked(fn: object) -> bool:
    """True when ``fn`` (or the function a ``functools.partial`` wraps) was marked
    with :func:`releases_gil`.

    Example:
        >>> import functools
        >>> is_marked(functools.partial(releases_gil(lambda x, y: x), 1)), is_marked(print)
        (True, False)
    """
    return _has(fn, _MARK)


def may_share(fn: object) -> bool:
    """True when ``fn`` may run in the training process: marked with
    :func:`shares_process` or :func:`releases_gil`.

    Example:
        >>> may_share(releases_gil(lambda x: x)), may_share(shares_process(abs)), may_share(abs)
        (True, True, False)
    """
    return _has(fn, _MARK) or _has(fn, _SHARES)


def _has(fn: object, mark: str) -> bool:
    while isinstance(fn, functools.partial):
        if getattr(fn, mark, False):
            return True
        fn = fn.func
    return bool(getattr(fn, mark, False))


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
