"""Deadlines of a loader's waits: the time left, and the error when it ran out."""

from __future__ import annotations

import time

from .errors import LoaderTimeout

__all__ = ["remaining", "timeout_error"]


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``perf_counter`` time; None: no limit).

    Example:
        >>> remaining(None) is None, remaining(0.0)
        (True, 0.0)
    """
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


def timeout_error(seconds: float | None) -> LoaderTimeout:
    """The error for ``timeout=seconds`` passing with nothing ready, and what to do.

    Example:
        >>> type(timeout_error(2.0)).__name__
        'LoaderTimeout'
    """
    return LoaderTimeout(
        f"no batch arrived within timeout={seconds} s; the dataset or a map function may "
        "be stuck, or a worker is busy with a slow record (raise timeout=, or look at "
        "the record named below)"
    )
