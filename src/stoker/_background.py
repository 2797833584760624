"""``Computed``: one value worked out on a short-lived thread while the caller goes on.

For pure, bounded computations that NumPy runs without the GIL (a sampler's next
window of a million positions: a permutation and a gather, ~20 ms) and that the
caller will need soon: started early on a second core, it is ready when asked for.

The thread owns nothing and waits on nothing: it runs the one function and ends, so
it needs no stopping. Whoever holds the :class:`Computed` is its owner; dropping it
lets the thread finish its work and exit on its own (it is a daemon thread, so it
never holds up the interpreter's exit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Computed"]

T = TypeVar("T")


class Computed(Generic[T]):
    """``compute()`` started now on a thread of its own; :meth:`result` waits for it.

    Example:
        >>> import numpy as np
        >>> ahead = Computed(lambda: np.arange(4)[::-1], name="demo")
        >>> ahead.result().tolist()
        [3, 2, 1, 0]

    Errors:
        ``result()`` raises what ``compute()`` raised.
    """

    def __init__(self, compute: Callable[[], T], name: str) -> None:
        self._compute = compute
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._compute()
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc

    def result(self) -> T:
        """The value, once the thread has ended (it runs one bounded computation)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error
