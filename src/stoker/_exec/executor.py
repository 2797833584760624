"""The ``Executor`` protocol: what stage 5 offers the window of jobs in flight.

The parent plans every job (which records, in which order) and owns the state; an
executor only builds what a job names, so the batches and the states never depend
on which executor ran the jobs. Every executor (inline, thread, process) implements
this protocol and passes the one contract test, ``tests/exec/test_executor_contract.py``.

To add an executor:

1. Write a class with the members below (``submit`` returns a
   :class:`concurrent.futures.Future` resolving to the job's :class:`~stoker._exec.jobs.Done`;
   run the job with :class:`~stoker._exec.jobs.Runtime`, which reads records,
   collates and reports skipped records the same way everywhere).
2. Add one branch for its mode to :func:`~stoker._exec.make.make_executor`.
3. Add one entry to ``EXECUTORS`` in the contract test.
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures._base import CANCELLED, PENDING, RUNNING
from typing import Protocol

from .._epoch.jobs import Done, Job, Submits

__all__ = ["Executor", "cancel_future", "claim"]


class Executor(Submits, Protocol):
    """Runs jobs; the window decides how many are in flight and in which order they are read.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> from stoker._exec.jobs import Job
        >>> from stoker._exec.make import make_executor, worker_spec
        >>> from stoker._config import LoaderConfig
        >>> from stoker._settings import settings_for
        >>> cfg, ds = LoaderConfig(batch_size=2), sk.range(10)
        >>> ex: Executor = make_executor("inline", worker_spec(cfg, ds), cfg, settings_for(cfg, ds))
        >>> job = Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0")
        >>> with ex:
        ...     ex.submit(job).result().value.tolist()
        [7, 8]

    Resources:
        An executor owns its threads, processes and shared-memory segments;
        :meth:`close` ends them all.

    Errors:
        A job's exception is set on its future, with the sample index as a note.
        Once the executor itself failed (a worker crashed, ``worker_init_fn``
        raised), :attr:`broken` holds that error and every later job fails with it.
    """

    mode: str
    """"inline", "thread" or "process": what ``it.stats().worker_mode`` reports."""

    num_workers: int
    """How many jobs may run at the same time (1 inline)."""

    @property
    def broken(self) -> BaseException | None:
        """The error that broke the executor, or None while it can run jobs."""
        ...

    def submit(self, job: Job) -> Future[Done]:
        """Run ``job`` (now, later, or when its result is asked for); a future of its result."""
        ...

    def cancel(self, token: int) -> None:
        """Drop the jobs of iterator ``token`` that have not started."""
        ...

    def close(self) -> None:
        """End every worker and cancel every job not finished (idempotent).

        Every thread waiting on a future of this executor wakes up.
        """
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def cancel_future(future: Future[Done]) -> None:
    """Cancel ``future`` unless it started, and wake every ``concurrent.futures.wait`` on it.

    ``Future.cancel()`` alone wakes ``result()`` but not ``wait()``: an executor
    that drops a job calls this instead.

    Example:
        >>> from concurrent.futures import Future
        >>> f: Future[Done] = Future()
        >>> cancel_future(f); f.cancelled()
        True
    """
    # CANCELLED -> CANCELLED_AND_NOTIFIED wakes wait(); a second call finds it done.
    if future.cancel() and future._state == CANCELLED:
        future.set_running_or_notify_cancel()


def claim(future: Future[Done]) -> bool:
    """Mark the future of a queued job running, as a worker takes the job; False when
    it was cancelled (or failed) while it waited: the job is dropped unrun. A job sent
    again after its worker died is running already: True.

    One lock a job (``running()``, ``done()`` and ``set_running_or_notify_cancel()``
    take the future's lock each; the last logs and raises on a finished future).

    Example:
        >>> from concurrent.futures import Future
        >>> f: Future[Done] = Future()
        >>> claim(f), f.running(), claim(f)
        (True, True, True)
        >>> g: Future[Done] = Future()
        >>> cancel_future(g); claim(g)
        False
    """
    state = future._state
    if state == RUNNING:
        return True
    return state == PENDING and future.set_running_or_notify_cancel()
