"""The process executors alive in this process, and what becomes of them at fork and exit.

After ``os.fork()`` the parent's workers are not the child's children; at interpreter
exit this process's workers are ended by their executors before multiprocessing's own
exit handler runs.
"""

from __future__ import annotations

import atexit
import multiprocessing.process
import multiprocessing.util  # its exit handler is registered first, so ours runs first
import os
import weakref
from typing import Any, Protocol

__all__ = ["track"]


class LiveExecutor(Protocol):
    """What this module asks of a process executor."""

    def close(self) -> None: ...

    def worker_processes(self) -> list[Any]: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()


def track(executor: LiveExecutor) -> None:
    """Remember ``executor`` (weakly) until it is collected."""
    _live.add(executor)


def _forget_workers_in_child() -> None:
    """After ``os.fork()``: the parent's workers are not this process's children.

    Without this, multiprocessing's exit handler in a forked child would SIGTERM the
    parent's daemon workers, which it finds in the inherited list of children.
    """
    children = getattr(multiprocessing.process, "_children", None)
    if children is None:
        return
    for executor in list(_live):
        for process in executor.worker_processes():
            children.discard(process)


def _close_at_exit() -> None:
    """At interpreter exit, end this process's workers before multiprocessing does.

    multiprocessing's exit handler terminates every daemon child it knows, then joins
    each; meanwhile an executor's results thread, seeing a worker end, frees that
    worker's process handle, and the join fails ("process object is closed", printed
    at the end of a script that left a loader open). Closing the executors first
    leaves multiprocessing nothing of ours to stop (atexit runs in reverse order of
    registration). In a forked child an executor is the parent's: ``close()`` does
    nothing there.
    """
    for executor in list(_live):
        executor.close()


os.register_at_fork(after_in_child=_forget_workers_in_child)
atexit.register(_close_at_exit)
