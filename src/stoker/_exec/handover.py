"""``HandoverExecutor``: batches from what starts fast while what starts slowly starts.

Worker processes take a while to start (a fork, unpickling the pipeline); threads
start at once. Under ``worker_mode="auto"`` a loader's executor is a
:class:`HandoverExecutor`: its first jobs run on worker threads (the first batch of
an iterator split across them, so that every core builds it; while there are no
more threads than cores, later jobs wait until it is done), the worker processes
start in the background once the first batch is done, and jobs submitted after every
process said it is ready go to the processes. When the measurements say that
handing a batch to a worker costs more than building it (tiny records), jobs run on
the caller's thread instead (inline), and go back to the workers if batches become
expensive again (see :mod:`stoker._tuning`). With ``num_workers="auto"`` on threads,
the tuner also sets how many threads run (:meth:`HandoverExecutor.resize`).

Which executor runs a job never changes a batch or the state: the parent plans every
job, and a job names its records and its place in the epoch.

The iterator's side, which measures and applies the tuner's decisions, is
:class:`~stoker._exec.autotune.Autotune`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import Any

from .._batching.pool import BufferPool
from .._stats import available_cores
from .._tuning import Tuner
from ..errors import IteratorFailed
from .executor import Executor, cancel_future
from .jobs import Done, Job, Runtime, WorkerSpec
from .merge import copy_future, split_build, splits
from .threads import ThreadExecutor, contained

__all__ = ["HandoverExecutor"]


_START_JOIN_SECONDS = 30.0
"""How long :meth:`HandoverExecutor.close` waits for process workers still starting."""


class HandoverExecutor:
    """Thread workers until the slower executor is ready, then it; or the caller's thread.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 4, "raise", 0, 2, None, None)
        >>> with HandoverExecutor(spec, target="thread") as ex:
        ...     job = Job(0, "build", ((Context(), np.array([1, 2, 3, 4])),), "batch 0")
        ...     ex.submit(job).result().value.tolist()
        [1, 2, 3, 4]

    Args:
        spec: what every worker needs.
        target: the mode the loader runs in once settled ("thread" or "process").
        start_target: starts the target executor (None when it is the thread workers).
        tuner: the policy that decides inline vs workers and the batches in flight.
        pool_slots: recycled batch buffers of the thread workers.
        inline_slots: those of batches built on the thread that asks for them.
        tune_allocator: raise glibc's thresholds in this process for the threads.

    Resources:
        Owns the thread workers, the target executor once started, and while it
        starts a thread ``stoker-handover-start``. :meth:`close` (idempotent) waits
        for that thread and closes both executors; the loader's lease calls it.

    Errors:
        A job's exception reaches its future as with the executor that ran it.
        When the target executor fails to start (a pipeline that cannot be pickled),
        every later job fails with that error and :attr:`broken` names it.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        target: str,
        start_target: Callable[[], Any] | None = None,
        tuner: Tuner | None = None,
        pool_slots: int = 8,
        inline_slots: int = 4,
        tune_allocator: bool = False,
    ) -> None:
        self.mode = target
        self.num_workers = spec.num_workers
        self.tuner = tuner if tuner is not None else Tuner(spec.num_workers)
        self.inline = False
        self._lock = threading.Lock()
        sized = self.tuner.sizer is not None and start_target is None
        self._fast = ThreadExecutor(
            spec,
            BufferPool(spec.batch_size, pool_slots),
            cpu_wait=sized,
            tune_allocator=tune_allocator,
        )
        self._runtime = Runtime(spec, 0, "inline", BufferPool(spec.batch_size, inline_slots))
        self._inline_slots = inline_slots
        self._start_target = start_target
        self._target: Any = None
        self._starter: threading.Thread | None = None
        self._start_error: BaseException | None = None
        self._closed = False
        self._split = splits(spec)
        self._last_token = -1  # the latest iterator seen (the lease counts them upwards)
        self.handed_over_at: float | None = None
        self._created = time.perf_counter()
        self._spec = spec
        self._inline_executor: Executor | None = None
        # While a first batch is split across the threads, later jobs wait here, so
        # that no thread leaves it for the next batch before it is done.
        self._held: list[tuple[Job, Future[Done]]] | None = None

    def inline_executor(self) -> Executor:
        """An executor that builds jobs on the thread asking for them, for an iterator
        the tuner sent inline (made once, ended with this executor)."""
        with self._lock:
            if self._inline_executor is None:
                from .inline import InlineExecutor

                spec = replace(self._spec, num_workers=0)
                pool = BufferPool(spec.batch_size, self._inline_slots)
                self._inline_executor = InlineExecutor(spec, pool)
            return self._inline_executor

    @property
    def workers(self) -> int:
        """The workers taking jobs now (the thread count changes under ``resize``)."""
        if self._start_target is None:
            return self._fast.workers
        return self.num_workers

    def resize(self, count: int) -> None:
        """Run ``count`` thread workers from now on (thread workers only; the count
        of process workers is fixed)."""
        if self._start_target is None:
            self._fast.resize(count)

    # -- where a job goes ------------------------------------------------------------

    @property
    def settled(self) -> bool:
        """True once jobs go where they will stay (the target executor is serving)."""
        return self._start_target is None or self.handed_over_at is not None

    def describe(self) -> str:
        """Where jobs run now and the tuner's latest reason (for ``it.stats()``)."""
        handover = ""
        if self._start_target is not None and self.handed_over_at is not None:
            handover = f", handed over to {self.mode} workers after {self.handed_over_at:.2f} s"
        return f"auto: {self.route}{handover}; {self.tuner.decision.reason}"

    @property
    def route(self) -> str:
        """Where the next job runs, in words."""
        if self.inline:
            return "inline (the caller's thread)"
        if self.settled:
            return f"{self.mode} workers"
        return f"thread workers while {self.mode} workers start"

    def _ready_target(self) -> Any:
        """The target executor if it is ready to take jobs, else None."""
        target = self._target
        if target is None or not getattr(target, "ready", True):
            return None
        if self.handed_over_at is None:
            self.handed_over_at = time.perf_counter() - self._created
        return target

    def submit(self, job: Job) -> Future[Done]:
        """Run ``job`` where it runs best now; its future resolves to a :class:`Done`."""
        if self._closed:
            return _failed(
                IteratorFailed(
                    "the loader's workers were closed (loader.close() or the end of its "
                    "with block) while this iterator was reading"
                )
            )
        if self._start_error is not None:
            return _failed(self._start_error)
        target = self._target
        if target is not None and target.broken is not None:
            return _failed(target.broken)  # its workers crashed: say so, even on threads
        first = job.token > self._last_token
        self._last_token = max(self._last_token, job.token)
        if self.inline and job.kind != "stream":
            return self._run_here(job)
        if self._start_target is None:
            target = self._fast
        else:
            target = self._ready_target()
            if target is None:
                target = self._fast
                if self._starter is None:
                    future = self._on_fast(job, first)
                    future.add_done_callback(lambda _f: self._start())
                    return future
        if target is self._fast:
            return self._on_fast(job, first)
        result: Future[Done] = target.submit(job)
        return result

    def _on_fast(self, job: Job, first: bool) -> Future[Done]:
        if first and self._split and job.kind == "build" and len(job.parts) == 1:
            return self._split_job(job)
        with self._lock:
            if self._held is not None:  # a split first batch has every thread
                future: Future[Done] = Future()
                self._held.append((job, future))
                return future
        return self._fast.submit(job)

    def _release(self) -> None:
        """Hand the jobs held during a split first batch to the threads, in order."""
        with self._lock:
            held, self._held = self._held, None
        for job, future in held or ():
            if future.cancelled():
                continue
            if self._closed:
                cancel_future(future)
                continue
            self._fast.submit(job).add_done_callback(partial(copy_future, into=future))

    def _run_here(self, job: Job) -> Future[Done]:
        future: Future[Done] = Future()
        future.set_running_or_notify_cancel()
        try:
            done = self._runtime.run(job)
        except Exception as exc:
            batch = job.batch_index
            future.set_exception(
                contained(exc, f"the calling thread while building {job.where}", batch)
            )
        else:
            future.set_result(done)
        return future

    def _split_job(self, job: Job) -> Future[Done]:
        """``job`` built by every thread worker, a slice each, then joined
        (:func:`~stoker._exec.merge.split_build`).

        While there are no more slices than cores, the jobs submitted meanwhile wait
        until it is done, so that no thread leaves it for the next batch.
        """
        ((_, indices),) = job.parts
        slices = min(self._fast.workers, len(indices))
        if slices < 2:
            return self._fast.submit(job)
        if slices <= available_cores():  # the slices have the cores to themselves
            with self._lock:
                self._held = []
        merged = split_build(self._fast.submit, job, slices, shared=True)
        if merged is None:  # not reached: there are two slices at least
            merged = self._fast.submit(job)
        merged.add_done_callback(lambda _f: self._release())
        return merged

    def _start(self) -> None:
        """Start the target executor on a thread of its own (once)."""
        with self._lock:
            if self._starter is not None or self._closed or self._start_target is None:
                return
            self._starter = threading.Thread(
                target=self._starting, name="stoker-handover-start", daemon=True
            )
            self._starter.start()

    def _starting(self) -> None:
        start = self._start_target
        if start is None:
            return
        try:
            target = start()
        except BaseException as exc:
            self._start_error = exc
            return
        with self._lock:
            closed = self._closed
            if not closed:
                self._target = target
        if closed:
            target.close()

    # -- what the lease and the iterator ask ------------------------------------------

    @property
    def broken(self) -> BaseException | None:
        """Why this executor cannot take jobs any more, or None."""
        if self._start_error is not None:
            return self._start_error
        target = self._target
        if target is not None and target.broken is not None:
            return target.broken  # type: ignore[no-any-return]
        return self._fast.broken

    @property
    def closed(self) -> bool:
        return self._closed

    def cancel(self, token: int) -> None:
        """Drop the queued jobs of iterator ``token`` wherever they wait."""
        with self._lock:
            held = [f for job, f in self._held or () if job.token == token]
        for future in held:
            cancel_future(future)
        self._fast.cancel(token)
        target = self._target
        if target is not None:
            target.cancel(token)

    def stacks(self) -> str:
        """The stacks of the workers (for the watchdog's report)."""
        parts = [self._fast.stacks()]
        target = self._target
        if target is not None and hasattr(target, "stacks"):
            parts.append(target.stacks())
        return "\n".join(parts)

    def close(self) -> None:
        """End the thread workers and the target executor (idempotent)."""
        if self._fast.foreign:
            return
        with self._lock:
            self._closed = True
            starter = self._starter
            held, self._held = self._held, None
        for _, future in held or ():
            cancel_future(future)
        if starter is not None and starter is not threading.current_thread():
            starter.join(_START_JOIN_SECONDS)
        self._fast.close()
        with self._lock:
            target, self._target = self._target, None
        if target is not None:
            target.close()
        if self._inline_executor is not None:
            self._inline_executor.close()
        self._runtime.builder.close()

    def __enter__(self) -> HandoverExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(error: BaseException) -> Future[Done]:
    future: Future[Done] = Future()
    future.set_exception(error)
    return future
