"""``QueuedExecutor``: the job queue that the thread and process executors share.

Both keep the jobs waiting for a worker in the parent, behind one lock: ``submit``
queues a job and returns its future, ``cancel`` drops an iterator's queued jobs, an
idle worker takes the first job it may run, and a broken executor fails every queued
and later job with the same error.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any

from ..errors import IteratorFailed
from .executor import cancel_future, claim
from .jobs import Done, Job

__all__ = ["CLOSED_WHILE_BUILDING", "QueuedExecutor"]

CLOSED_WHILE_BUILDING = "the loader was closed while this batch was being built"


class QueuedExecutor:
    """Base of the executors: a queue of (job, future) pairs and its lock.

    Subclasses implement :meth:`_queued` (a job was added: wake or dispatch a worker)
    and ``close``.
    """

    mode = "?"

    def __init__(self, num_workers: int) -> None:
        self.num_workers = num_workers
        self._cond = threading.Condition(threading.RLock())
        self._pending: deque[tuple[Job, Future[Done]]] = deque()
        self._closed = False
        self.broken: BaseException | None = None
        self._pid = os.getpid()  # close() acts only in the process that started the workers

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, job: Job) -> Future[Done]:
        """Queue ``job``; its future resolves to the worker's :class:`Done`."""
        future: Future[Done] = Future()
        with self._cond:
            if self._closed:
                future.set_exception(
                    IteratorFailed(
                        "the loader's workers were closed (loader.close() or the end of its "
                        "with block) while this iterator was reading"
                    )
                )
                return future
            if self.broken is not None:
                future.set_exception(self.broken)
                return future
            self._pending.append((job, future))
            self._queued(job)
        return future

    def _queued(self, job: Job) -> None:
        raise NotImplementedError

    def cancel(self, token: int) -> None:
        """Drop the queued jobs of iterator ``token`` (jobs already running finish)."""
        with self._cond:
            dropped = [f for j, f in self._pending if j.token == token]
            self._pending = deque((j, f) for j, f in self._pending if j.token != token)
        for future in dropped:
            cancel_future(future)

    def _next_for(self, worker_id: int) -> tuple[Job, Future[Done]] | None:
        """The first queued job worker ``worker_id`` may run, now running (lock held).

        A stream part's jobs go only to the worker that owns the part (its cursor
        lives there); cancelled jobs are dropped on the way.
        """
        position = 0
        while position < len(self._pending):
            job, future = self._pending[position]
            if job.part >= 0 and job.part % self.num_workers != worker_id:
                position += 1
                continue
            del self._pending[position]
            if claim(future):  # else cancelled (or failed) while it waited: dropped unrun
                return job, future
        return None

    def _break(self, exc: BaseException) -> None:
        """Fail every queued job, and every later one, with ``exc``."""
        with self._cond:
            if self.broken is None:
                self.broken = exc
            queued, self._pending = list(self._pending), deque()
        for _, future in queued:
            if claim(future):
                future.set_exception(exc)

    @property
    def foreign(self) -> bool:
        """True in a forked child, where the workers and the lock are the parent's."""
        return os.getpid() != self._pid

    def _take_all(self) -> list[tuple[Job, Future[Done]]]:
        """Empty the queue (closing); the caller cancels what it returns."""
        with self._cond:
            self._closed = True
            queued, self._pending = list(self._pending), deque()
        return queued

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError
