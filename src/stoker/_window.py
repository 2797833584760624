"""``JobWindow``: one bounded window of jobs in flight on an executor (stage 6).

The parent plans every job; the window keeps up to ``depth`` of them in work and
hands their batches out in order (a reorder buffer) or as they finish. It serves
every executor: the inline one builds a batch when the window asks for its result
(``DeferredFuture.run``) instead of the window waiting for it.

:func:`open_window` is stage 6 of one pass: a plan that plans jobs gets a
``JobWindow``; a plan that fills its batches itself (a stream, batches filled past
a filter) keeps its own reads in flight on the executor. Without workers, a
:class:`~stoker._prefetch.Prefetcher` builds the batches on the asking thread, or
ahead on a thread of its own when that pays off.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future
from concurrent.futures import wait as futures_wait
from functools import partial
from typing import Any, NamedTuple

from ._config import DEFAULT_DEPTH, LoaderConfig
from ._deadline import remaining, timeout_error
from ._epoch.plan import EpochPlan, ReadAhead
from ._exec.executor import Executor, cancel_future
from ._exec.inline import DeferredFuture, InlineExecutor
from ._exec.jobs import Done, Job, Tally
from ._prefetch import Item, Prefetcher
from ._state import with_ahead
from .errors import IteratorFailed

__all__ = ["JobWindow", "PassWindow", "inline_depth", "open_window"]


def _stamp(stamps: dict[int, float], seq: int) -> Callable[[Future[Done]], None]:
    """A done-callback that notes when job ``seq`` finished (it holds no window)."""

    def stamp(_: Future[Done]) -> None:
        stamps[seq] = time.perf_counter()

    return stamp


class JobWindow:
    """Up to ``depth`` jobs in flight on an executor; their batches in order or as they finish.

    ``next_job()`` plans the next job (None: no more); ``finish(job, done)`` turns a
    worker's result into an item, or None for a batch that turned out empty. An
    item's state is the window's :meth:`state` once it is handed out. With
    ``ordered=False`` a finished batch is handed out before an earlier one still in
    work; the state then names the batches handed out ahead of the first missing
    one (``"ahead"``), so a restore skips exactly those (in any mode). ``depth``
    may be changed between two :meth:`get` calls; it changes only how far ahead
    jobs are submitted, never which batches come out or the states.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> from stoker._batching.pool import BufferPool
        >>> from stoker._exec.jobs import Job, WorkerSpec
        >>> from stoker._exec.threads import ThreadExecutor
        >>> jobs = iter([Job(s, "build", ((Context(), np.array([s])),), "", {"b": s + 1}, 1)
        ...              for s in range(3)])
        >>> ex = ThreadExecutor(WorkerSpec(sk.range(3), None, 1, "raise", 0, 2, None, None),
        ...                     BufferPool(1, 4))
        >>> w = JobWindow(lambda: next(jobs, None), lambda j, d: (d.value, j.state, 1), ex,
        ...               depth=2, ordered=True, timeout=None, start_state={"b": 0})
        >>> [w.get()[0].tolist() for _ in range(3)], w.state()
        ([[0], [1], [2]], {'b': 3})
        >>> w.close(); ex.close()

    Resources:
        Holds futures only; :meth:`close` cancels the jobs not yet started.

    Errors:
        A job's exception is re-raised by :meth:`get`, and the next :meth:`get`
        goes on with the next batch; :class:`~stoker.LoaderTimeout` when no batch
        finishes within ``timeout``.
    """

    def __init__(
        self,
        next_job: Callable[[], Job | None],
        finish: Callable[[Job, Done], Item | None],
        executor: Executor,
        *,
        depth: int,
        ordered: bool,
        timeout: float | None,
        start_state: dict[str, Any],
        ahead: Iterable[int] = (),
        token: int = 0,
    ) -> None:
        self._next_job = next_job
        self._finish = finish
        self._executor = executor
        # Workers plan the next job as soon as one is handed out, to keep busy; jobs
        # built when asked for are planned when asked for, so that a change made
        # between two batches (a mixture's weights) reaches the very next one.
        self._plans_ahead = executor.mode != "inline"
        # An inline executor's jobs are built right here, one at a time, with no
        # future in between (the tiny-record case, where that layer was the cost).
        self._here = executor if isinstance(executor, InlineExecutor) else None
        self.depth = max(1, depth)
        self.ordered = ordered
        self._timeout = timeout
        self._token = token
        self._inflight: deque[tuple[Job, Future[Done]]] = deque()
        self._planned_all = False
        self._closed = False
        # Unordered bookkeeping: batches handed out at or after the first missing one.
        self._skip = set(ahead)
        self._out: set[int] = set(self._skip)
        self._low_state = start_state
        self._states: dict[int, dict[str, Any]] = {}
        self._low: int | None = None
        self.wait_seconds = 0.0
        # For the stats: jobs' time from submit to finish, and the time the window was
        # full of finished batches, waiting for the consumer to take one.
        self.latency_seconds = 0.0
        self.idle_seconds = 0.0
        self._submitted: dict[int, float] = {}
        self._finished_at: dict[int, float] = {}
        self._returned_at: float | None = None
        self._waiting = False  # in _take: Ctrl-C there loses no batch
        # False once Ctrl-C interrupted planning or handing out a batch, so that a
        # batch may be lost; Ctrl-C while waiting for one keeps the window as it was.
        self.intact = True
        self._building: Job | None = None  # the job being built on this thread

    def in_flight(self) -> list[Job]:
        """The jobs in flight (the one being built on the calling thread included)."""
        jobs = [job for job, _ in list(self._inflight)]
        building = self._building
        if building is not None:
            jobs.insert(0, building)
        return jobs

    def state(self) -> dict[str, Any]:
        """The state after the batches handed out so far."""
        if not self._out:
            return self._low_state
        ahead = sorted(s for s in self._out if self._low is None or s >= self._low)
        return with_ahead(self._low_state, ahead)

    def _top_up(self) -> None:
        while not self._planned_all and len(self._inflight) < self.depth:
            job = self._next_job()
            if job is None:
                self._planned_all = True
                return
            if self._low is None:
                self._low = job.seq
            if job.seq in self._skip:
                self._skip.discard(job.seq)
                self._handed_out(job)
                continue
            submitted = time.perf_counter()
            future = self._executor.submit(job)
            if not isinstance(future, DeferredFuture):  # built when asked for: no latency
                self._submitted[job.seq] = submitted
                future.add_done_callback(_stamp(self._finished_at, job.seq))
            self._inflight.append((job, future))

    def fill(self) -> None:
        """Submit jobs up to ``depth`` now rather than at the next :meth:`get` (after
        the tuner raised the depth for threads about to start: each takes a job as it
        starts).

        Example:
            >>> import numpy as np, stoker as sk
            >>> from stoker._context import Context
            >>> from stoker._batching.pool import BufferPool
            >>> from stoker._exec.jobs import Job, WorkerSpec
            >>> from stoker._exec.threads import ThreadExecutor
            >>> jobs = iter([Job(s, "build", ((Context(), np.array([s])),), "", {"b": s + 1}, 1)
            ...              for s in range(6)])
            >>> ex = ThreadExecutor(WorkerSpec(sk.range(6), None, 1, "raise", 0, 2, None, None),
            ...                     BufferPool(1, 8))
            >>> w = JobWindow(lambda: next(jobs, None), lambda j, d: (d.value, j.state, 1), ex,
            ...               depth=1, ordered=True, timeout=None, start_state={"b": 0})
            >>> w.depth = 4; w.fill(); len(w.in_flight())
            4
            >>> [int(w.get()[0][0]) for _ in range(6)], w.state()
            ([0, 1, 2, 3, 4, 5], {'b': 6})
            >>> w.close(); ex.close()
        """
        if not self._closed and self._here is None and len(self._inflight) < self.depth:
            self._top_up()

    def _handed_out(self, job: Job) -> None:
        seq = job.seq
        if seq == self._low and not self._out:  # in order: the usual case
            if job.state is not None:
                self._low_state = job.state
            self._low = seq + 1
            return
        self._out.add(seq)
        if job.state is not None:
            self._states[seq] = job.state
        while self._low is not None and self._low in self._out:
            self._out.discard(self._low)
            self._low_state = self._states.pop(self._low, self._low_state)
            self._low += 1

    def _take(self, deadline: float | None) -> tuple[Job, Future[Done]]:
        if self.ordered:
            pair = self._inflight[0]
            future = pair[1]
            if not future.done():
                self._wait([future], deadline)
                if not future.done():
                    raise timeout_error(self._timeout)
            return pair
        finished = [pair for pair in self._inflight if pair[1].done()]
        if not finished:
            self._wait([f for _, f in self._inflight], deadline)
            finished = [pair for pair in self._inflight if pair[1].done()]
            if not finished:
                raise timeout_error(self._timeout)
        return min(finished, key=lambda p: p[0].seq)

    def _wait(self, futures: list[Future[Done]], deadline: float | None) -> None:
        """Wait until one of ``futures`` is done or ``deadline`` passes."""
        futures_wait(futures, remaining(deadline), FIRST_COMPLETED)

    def get(self) -> Item:
        """The next item; ``StopIteration`` after the last one."""
        if self._here is not None and not self._inflight:
            return self._build_here(self._here)
        start = time.perf_counter()
        deadline = None if self._timeout is None else start + self._timeout
        if self._plans_ahead:  # jobs built when asked for never wait for the consumer
            self._count_idle(start)
        try:
            while True:
                if self._closed:
                    raise StopIteration
                if len(self._inflight) < self.depth:
                    self._top_up()
                    if not self._inflight:
                        raise StopIteration
                self._waiting = True
                head = self._inflight[0]
                if isinstance(head[1], DeferredFuture):  # built below, by asking for it
                    job, future = head
                else:
                    job, future = self._take(deadline)  # in flight: Ctrl-C loses nothing
                self._waiting = False
                if head[1] is future:
                    self._inflight.popleft()
                else:
                    self._inflight.remove((job, future))
                if self._submitted:  # workers' jobs: from submit to finish, for the stats
                    submitted = self._submitted.pop(job.seq, start)
                    self.latency_seconds += self._finished_at.pop(job.seq, start) - submitted
                try:
                    done = future.result()
                    item = self._finish(job, done)
                except CancelledError:
                    raise IteratorFailed(
                        "the loader's workers were closed while this iterator was reading"
                    ) from None
                except BaseException:
                    self._handed_out(job)  # the batch is gone; the next one may follow
                    del future  # the traceback keeps this frame: no cycle through the future
                    raise
                self._handed_out(job)
                if self._plans_ahead and len(self._inflight) < self.depth:
                    self._top_up()
                if item is not None:
                    if self._out or self._low != job.seq + 1:  # not simply the next in order
                        return item[0], self.state(), item[2]  # (it may close a gap)
                    return item
        except KeyboardInterrupt:
            if not self._waiting:
                self.intact = False
            raise
        finally:
            self._waiting = False
            self._returned_at = time.perf_counter()
            self.wait_seconds += self._returned_at - start

    def _build_here(self, executor: InlineExecutor) -> Item:
        """The next item, its job planned and built on this thread (inline executors).

        Untimed: the caller's own clock (the prefetcher's) counts this as its wait."""
        try:
            while True:
                if self._closed or self._planned_all:
                    raise StopIteration
                if executor.closed:
                    raise IteratorFailed(
                        "the loader's workers were closed while this iterator was reading"
                    )
                job = self._next_job()
                if job is None:
                    self._planned_all = True
                    raise StopIteration
                if self._low is None:
                    self._low = job.seq
                if job.seq in self._skip:
                    self._skip.discard(job.seq)
                    self._handed_out(job)
                    continue
                self._building = job
                try:
                    item = self._finish(job, executor.runtime.run(job))
                finally:
                    self._building = None
                    self._handed_out(job)  # an error loses that batch; the next one follows
                if item is not None:
                    if self._out or self._low != job.seq + 1:  # not simply the next in order
                        return item[0], self.state(), item[2]  # (it may close a gap)
                    return item
        except KeyboardInterrupt:
            self.intact = False
            raise

    def _count_idle(self, now: float) -> None:
        """Add the time since the last batch was handed out during which every job in
        the window had finished: the workers waited for the consumer."""
        if self._returned_at is None or len(self._inflight) < self.depth:
            return
        stamps = self._finished_at
        finished = [stamps.get(job.seq) for job, _ in self._inflight]
        if all(t is not None for t in finished):
            last = max(t for t in finished if t is not None)
            self.idle_seconds += max(0.0, now - max(last, self._returned_at))

    def close(self) -> None:
        """Cancel this window's jobs that have not started (idempotent)."""
        self._closed = True
        self._executor.cancel(self._token)
        for _, future in self._inflight:
            cancel_future(future)
        self._inflight.clear()


class PassWindow(NamedTuple):
    """Stage 6 of one pass, as :func:`open_window` opens it."""

    window: Prefetcher[Item] | JobWindow
    """What ``next()`` reads: ``get()`` returns (batch, state, records)."""
    jobs: JobWindow | None
    """The window of jobs, when the plan plans one job per batch (the tuner sets its depth)."""
    keep_going: bool
    """After an error of one batch, the next ``get()`` goes on with the next batch
    (False where reads run ahead across batches on workers: a stream's parts, batches
    filled past a filter)."""


def open_window(
    plan: EpochPlan,
    executor: Executor | None,
    token: int,
    cfg: LoaderConfig,
    tally: Tally,
    *,
    inline: bool,
    ahead: Iterable[int] = (),
    name: str = "stoker-prefetch",
) -> PassWindow:
    """Stage 6 of one pass: the window of batches in flight for ``plan`` on ``executor``.

    ``inline`` says the pass has no workers (its executor, if any, builds a batch
    when asked); ``ahead`` names the batches a state saved with ``ordered=False``
    already handed out; ``tally`` hears of every job's result.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._epoch.choose import epoch_plan
        >>> from stoker._exec.make import pass_executor
        >>> from stoker._hosts import ONE_HOST
        >>> from stoker._sampling.sequential import SequentialSampler
        >>> cfg, ds = LoaderConfig(batch_size=2), sk.range(4)
        >>> plan, builder = epoch_plan(
        ...     cfg, ds, SequentialSampler(4), ONE_HOST, {}, "inline", 0, None
        ... )
        >>> ex, token, give_back = pass_executor(plan, "inline", cfg, ds, lease=None)
        >>> opened = open_window(plan, ex, token, cfg, Tally(10), inline=True)
        >>> [opened.window.get()[0].tolist() for _ in range(2)], opened.keep_going
        ([[0, 1], [2, 3]], True)
        >>> opened.window.close(); give_back(); builder.close()
    """
    depth = 1 if inline else cfg.prefetch if cfg.prefetch else 2 * cfg.num_workers
    timeout = None if inline else cfg.timeout
    jobs = None
    produce: Callable[[], Item | None]
    if plan.plans_jobs:
        if executor is None:
            raise RuntimeError("a plan of jobs needs an executor")
        jobs = JobWindow(
            partial(plan.next_job, token),
            tally.finish,
            executor,
            depth=depth,
            ordered=cfg.ordered,
            timeout=timeout,
            start_state=plan.state(),
            ahead=ahead,
            token=token,
        )
        produce = jobs.get
    else:  # the plan keeps its own reads in flight on the executor
        plan.read_with(executor, ReadAhead(depth, cfg.ordered, timeout, token, tally.count))
        produce = plan.next_item
    window: Prefetcher[Item] | JobWindow
    if inline:  # on the asking thread, or on a prefetch thread when it pays off
        depth_ahead = inline_depth(cfg.prefetch, cfg.timeout)
        window = Prefetcher(produce, depth_ahead, cfg.timeout, name=name, keep_going=True)
    elif jobs is not None:
        window = jobs
    else:
        window = Prefetcher(produce, 0, None, name=name)
    return PassWindow(window, jobs, keep_going=inline or jobs is not None)


def inline_depth(prefetch: int | None, timeout: float | None) -> int | None:
    """Batches the inline prefetch thread builds ahead (None: decided by probing).

    Example:
        >>> inline_depth(None, None), inline_depth(None, 5.0), inline_depth(0, None)
        (None, 2, 0)
    """
    if prefetch is None and timeout is not None:
        return DEFAULT_DEPTH  # the timeout watches the prefetch thread
    return prefetch
