"""``WorkerLease``: a loader's persistent workers, lent to one iterator at a time.

Workers start with a loader's first iterator and serve every later epoch, so an
epoch does not pay for starting processes and sending the pipeline again. One
iterator holds them at a time; an iterator created while another one still reads
gets workers of its own, which end with it.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable

from .executor import Executor

__all__ = ["WorkerLease"]


class WorkerLease:
    """Starts, lends and ends the workers of one loader.

    Resources:
        Owns the loader's shared executor (its threads or processes), ended by
        :meth:`close`, which also runs when the loader is garbage collected or the
        interpreter exits. Private executors lent to concurrent iterators are ended
        by their iterators.
    """

    def __init__(self, owner: object) -> None:
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._starts = itertools.count()  # worker seeds differ between starts
        self._shared: Executor | None = None
        self._holder: int | None = None
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(owner, self.close)  # ends with its loader

    def lease(self, start: Callable[[int], Executor]) -> tuple[Executor, int, Callable[[], None]]:
        """An executor for a new iterator, its token, and how to give it back.

        ``start(n)`` starts the executor of the loader's ``n``-th worker start (``n``
        decides the workers' seeds); it is called only when no shared one is free.
        """
        with self._lock:
            token = next(self._tokens)
            if self._shared is not None and self._shared.broken is not None:
                self._shared.close()
                self._shared = None
                self._holder = None
            if self._holder is None:
                if self._shared is None:
                    self._shared = start(next(self._starts))
                self._holder = token
                return self._shared, token, lambda: self._give_back(token)
            n = next(self._starts)
        private = start(n)
        return private, token, private.close

    def _give_back(self, token: int) -> None:
        with self._lock:
            if self._holder == token:
                self._holder = None

    def close(self) -> None:
        """End the shared workers (idempotent); the next iterator starts new ones.

        In a forked child (a PyTorch worker, a user's ``os.fork()``) it does nothing:
        the workers, pipes and locks it inherited belong to the parent.
        """
        if os.getpid() != self._pid:
            return
        with self._lock:
            shared, self._shared, self._holder = self._shared, None, None
        if shared is not None:
            shared.close()
