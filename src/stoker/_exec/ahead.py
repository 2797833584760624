"""``AheadExecutor``: one thread that builds a pass's jobs ahead, without workers.

With ``num_workers=0`` a pass builds its batches on the caller's thread; when a
thread pays off (``prefetch >= 1``, or the window's probe says so) the window
submits its jobs here instead: one daemon thread runs them, in order, with the
inline executor's own runtime (the same builder and buffers), so that loading
overlaps the training step. It is an executor like the others, fed by the same
window: nothing else keeps work in flight.

With ``prefetch=None`` the window decides from the first ``PROBES`` batches, built
on the asking thread: it times building a batch (p) and the caller's work between
two ``get()`` calls (g, the training step). A thread can hide at most min(p, g) per
batch, and a hand-off between threads costs ~10-30 µs on an idle interpreter and
~50 µs when both threads run Python (they take turns on the GIL). So the thread
starts, with ``DEFAULT_DEPTH`` batches ahead, only when the median of min(p, g) is
at least ``THREAD_THRESHOLD``; otherwise batches stay on the caller's thread, where
the hand-off would cost more than the overlap could win.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence

from .executor import cancel_future
from .jobs import Done, Job
from .queue import QueuedExecutor
from .threads import JOIN_SECONDS, contained

__all__ = ["PROBES", "THREAD_THRESHOLD", "AheadExecutor", "thread_pays_off"]

THREAD_THRESHOLD = 200e-6
"""Seconds per batch a thread building ahead must be able to hide (see above)."""
PROBES = 4
"""Batches timed on the asking thread before the window decides."""


def thread_pays_off(probes: Sequence[float]) -> bool | None:
    """Whether a thread building ahead pays off, from min(building, the caller's
    work) of the first batches; None while fewer than :data:`PROBES` were timed.

    Example:
        >>> thread_pays_off([1e-3] * 4), thread_pays_off([1e-5] * 4), thread_pays_off([1.0])
        (True, False, None)
    """
    if len(probes) < PROBES:
        return None
    return statistics.median(probes[:PROBES]) >= THREAD_THRESHOLD


class AheadExecutor(QueuedExecutor):
    """Runs jobs with ``run`` on one thread named ``name``, in the order submitted.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> from stoker._batching.pool import BufferPool
        >>> from stoker._exec.jobs import Runtime, WorkerSpec
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 0, None, None)
        >>> runtime = Runtime(spec, 0, "inline", BufferPool(2, 4))
        >>> with AheadExecutor(runtime.run, "demo") as ex:
        ...     ex.submit(Job(0, "build", ((Context(), np.array([3, 4])),), "b")).result().value
        array([3, 4])

    Resources:
        Owns one daemon thread. :meth:`close` (idempotent) cancels the queued jobs,
        lets the running one finish and joins the thread; the window that started
        it calls it when it is closed. After :meth:`finish` the thread ends by
        itself once the jobs queued are done.

    Errors:
        A job's exception is set on its future (``sys.exit()`` in user code becomes
        a :class:`~stoker.WorkerError`, see :func:`~stoker._exec.threads.contained`).
    """

    mode = "inline"

    def __init__(self, run: Callable[[Job], Done], name: str) -> None:
        super().__init__(1)
        self._run = run
        self._last = False  # no job comes after those queued: the thread ends after them
        self.thread = threading.Thread(target=self._work, name=name, daemon=True)
        self.thread.start()

    def _queued(self, job: Job) -> None:
        self._cond.notify()

    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                taken = None
                while not self._closed and (taken := self._next_for(0)) is None:
                    if self._last:
                        return
                    cond.wait()
                if taken is None:  # closed
                    return
                job, future = taken
            try:
                future.set_result(self._run(job))
            except BaseException as exc:
                future.set_exception(contained(exc, "the prefetch thread", job.batch_index))
            del future, taken

    def finish(self) -> None:
        """No more jobs will come: the thread ends once it has run those queued."""
        with self._cond:
            self._last = True
            self._cond.notify_all()

    def stacks(self) -> str:
        """The Python stack of the thread (for the watchdog's report)."""
        from .._watchdog import thread_stack

        return f"thread {self.thread.name}:\n{thread_stack(self.thread)}"

    def close(self) -> None:
        """Cancel the queued jobs and end the thread (idempotent)."""
        if self.foreign:
            return
        for _, future in self._take_all():
            cancel_future(future)
        with self._cond:
            self._cond.notify_all()
        if self.thread is not threading.current_thread():
            self.thread.join(JOIN_SECONDS)
