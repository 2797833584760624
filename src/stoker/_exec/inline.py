"""``InlineExecutor``: jobs run when their result is asked for, on the asking thread.

With ``num_workers=0`` nothing starts: the window asks for a batch's result on the
caller's thread (or on the prefetch thread when prefetch is on), and that thread
builds the batch right then. A job is a :class:`DeferredFuture` until then, so
planning ahead costs nothing and no batch is built before it is wanted.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from typing import Any

from .._batching.pool import BufferPool
from .executor import cancel_future
from .jobs import Done, Job, Runtime, WorkerSpec

__all__ = ["DeferredFuture", "InlineExecutor"]


class DeferredFuture(Future[Done]):
    """A future whose job runs on the first thread that asks for its result.

    :meth:`run` runs it ahead of that. It is a full :class:`~concurrent.futures.Future`
    (callbacks, ``concurrent.futures.wait``), but makes its lock only when another
    thread waits on it: most are asked for by the thread that runs them.
    """

    def __init__(self, executor: InlineExecutor, job: Job) -> None:  # no Future.__init__
        self._state = PENDING
        self._result: Done | None = None
        self._exception: BaseException | None = None
        self._executor: InlineExecutor | None = executor
        self._job: Job | None = job
        self.token = job.token

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]  # made when needed
        cond: threading.Condition | None = self.__dict__.get("_cond")
        if cond is None:
            with _MAKING:
                cond = self.__dict__.setdefault("_cond", threading.Condition())
        return cond

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        waiters: list[Any] = self.__dict__.setdefault("_waiters_list", [])
        return waiters

    @property
    def _done_callbacks(self) -> list[Any]:
        callbacks: list[Any] = self.__dict__.setdefault("_callbacks_list", [])
        return callbacks

    def run(self) -> None:
        """Run the job now, unless it ran or was cancelled already (or its executor closed)."""
        executor, job = self._executor, self._job
        if executor is None or job is None:
            return
        self._executor = self._job = None
        executor.pending.discard(self)
        if self._state != PENDING:  # cancelled
            return
        self._state = RUNNING
        try:
            done = executor.runtime.run(job)
        except BaseException as exc:  # Ctrl-C and SystemExit too: the asker re-raises them
            self.set_exception(exc)
            del self  # the traceback keeps this frame: no cycle through the future
        else:
            if "_cond" in self.__dict__:
                self.set_result(done)  # someone may wait: wake them
            else:
                self._result, self._state = done, FINISHED

    def done(self) -> bool:
        return self._state in _DONE

    def result(self, timeout: float | None = None) -> Done:
        if self._state == PENDING:
            self.run()
        if self._state == FINISHED and self._exception is None:
            return self._result  # type: ignore[return-value]  # the usual case: no lock
        try:
            return super().result(timeout)
        finally:
            del self  # break the cycle future -> exception -> traceback -> this frame

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == PENDING:
            self.run()
        return super().exception(timeout)


_MAKING = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class InlineExecutor:
    """Runs jobs in the calling process, when their results are asked for.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 0, None, None)
        >>> with InlineExecutor(spec, BufferPool(2, 4)) as ex:
        ...     future = ex.submit(Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0"))
        ...     future.done(), future.result().value.tolist()
        (False, [7, 8])

    Resources:
        Owns no thread or process; it holds the batch buffers of its pool and, for
        large gathers, the builder's helper threads, ended by :meth:`close`.

    Errors:
        A job's exception is raised by ``result()`` with its original traceback and
        the sample index as a note. After :meth:`close`, jobs not run are cancelled.
    """

    mode = "inline"
    num_workers = 1
    broken: BaseException | None = None

    def __init__(self, spec: WorkerSpec, pool: BufferPool) -> None:
        self.runtime = Runtime(spec, 0, "inline", pool, split=True)
        self.pending: set[DeferredFuture] = set()  # submitted, not run yet
        self.closed = False

    @property
    def pool(self) -> BufferPool:
        """The buffers batches are built into."""
        return self.runtime.builder.pool

    def submit(self, job: Job) -> Future[Done]:
        """A future that builds ``job`` when its result is first asked for."""
        future = DeferredFuture(self, job)
        if self.closed:
            cancel_future(future)
        else:
            self.pending.add(future)
        return future

    def cancel(self, token: int) -> None:
        """Cancel the jobs of iterator ``token`` that have not run."""
        for future in [f for f in self.pending if f.token == token]:
            self.pending.discard(future)
            cancel_future(future)

    def close(self) -> None:
        """Cancel every job not run (waking whoever waits on one) and release the
        builder's helpers (idempotent); later jobs are cancelled."""
        if self.closed:
            return
        self.closed = True
        pending, self.pending = self.pending, set()
        for future in pending:
            cancel_future(future)
        self.runtime.builder.close()

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
