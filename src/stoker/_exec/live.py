"""The process's open process executors, and what happens to their workers at a fork
and at interpreter exit.

* After ``os.fork()`` the parent's workers are not the child's children: they are
  taken off the child's copy of multiprocessing's list, or its exit handler would
  SIGTERM them.
* At exit, executors still open (a script that ended without closing its loader) are
  closed before multiprocessing's own exit handler runs. That handler terminates and
  joins every child it lists; were the executors open, their results threads would
  see those workers die and close their ``Process`` handles while the handler joins
  them ("process object is closed"). Closed first, every worker is stopped, joined,
  released and no longer listed. The hook is registered after ``multiprocessing.util``
  is imported, so ``atexit`` (last in, first out) runs it before that handler; a
  forked child's copies are left alone (``close()`` does nothing there).
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util
import os
import weakref
from typing import Any, Protocol

__all__ = ["track"]


class _Open(Protocol):
    def close(self) -> None: ...

    def processes(self) -> list[Any]: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()


def track(executor: _Open) -> None:
    """Count ``executor`` among the open ones until it is collected.

    Example:
        >>> class Nothing:
        ...     def close(self): pass
        ...     def processes(self): return []
        >>> keep = Nothing(); track(keep)
    """
    _live.add(executor)


def _forget_workers_in_child() -> None:
    children = getattr(multiprocessing.process, "_children", None)
    if children is None:
        return
    for executor in list(_live):
        for process in executor.processes():
            children.discard(process)


def _close_before_multiprocessing_exits() -> None:
    for executor in list(_live):
        executor.close()


os.register_at_fork(after_in_child=_forget_workers_in_child)
atexit.register(_close_before_multiprocessing_exits)
