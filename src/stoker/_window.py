"""``JobWindow``: one bounded window of jobs in flight on an executor (stage 6).

The parent plans every job; the window keeps up to ``depth`` of them in work and
hands their batches out in order (a reorder buffer) or as they finish. It serves
every plan (a batch per job; chunks of records filled past a filter or packed; a
stream's parts read by workers, whose jobs hand back zero or more batches) and
every executor: the inline one builds a job right here, on the asking thread,
with no future in between. The timeout, Ctrl-C, ``ordered=False``, the records
skipped and the stats are handled here, once.

Without workers, a thread may build the batches ahead of the training step: the
window then submits its jobs to a one-thread executor
(:class:`~stoker._exec.ahead.AheadExecutor`) like to any other, when the first
batches, built on the asking thread, show that it pays off
(:func:`~stoker._exec.ahead.thread_pays_off`).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, InvalidStateError
from concurrent.futures import wait as futures_wait
from typing import Any

from ._config import DEFAULT_DEPTH
from ._deadline import remaining, timeout_error
from ._epoch.handed import HandedOut
from ._epoch.jobs import Wait
from ._epoch.plan import EpochPlan, Item
from ._exec.ahead import AheadExecutor, thread_pays_off
from ._exec.executor import Executor, cancel_future
from ._exec.inline import DeferredFuture, InlineExecutor
from ._exec.jobs import Done, Job, Tally
from .errors import IteratorFailed

__all__ = ["JobWindow"]


def _stamp(stamps: dict[int, float], seq: int) -> Callable[[Future[Done]], None]:
    """A done-callback that notes when job ``seq`` finished (it holds no window)."""

    def stamp(_: Future[Done]) -> None:
        stamps[seq] = time.perf_counter()

    return stamp


class JobWindow:
    """Up to ``depth`` of a plan's jobs in flight on an executor; their batches in
    order or as they finish.

    The plan plans the jobs (``plan.next_job``: None when there are no more, ``WAIT``
    when it has nothing to plan until a job in flight finishes). When every job is
    one batch (``plan.job_per_batch``) the tally turns a finished job into an item
    (None for a batch whose records were all skipped) whose state is the window's
    :meth:`state` once it is handed out; with ``ordered=False`` a finished batch is
    handed out before an earlier one still in work, and the state then names the
    batches handed out ahead of the first missing one (``"ahead"``), so that a
    restore skips exactly those (in any mode). Otherwise a finished job goes back to
    the plan (``plan.take``), which hands out zero or more batches from it
    (``plan.ready``) in its own order (``plan.wants`` names the job it needs next).
    ``depth`` may be changed between two :meth:`get` calls; it changes only how far
    ahead jobs are submitted, never which batches come out or the states.

    The timeout, the wait time and the stats, Ctrl-C and the skipped records are
    handled here, for every plan and executor.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._epoch.choose import epoch_plan
        >>> from stoker._exec.make import make_executor, worker_spec
        >>> from stoker._hosts import ONE_HOST
        >>> from stoker._sampling.sequential import SequentialSampler
        >>> from stoker._settings import settings_for
        >>> cfg, ds = LoaderConfig(batch_size=2, num_workers=1), sk.range(6)
        >>> settings = settings_for(cfg, ds)
        >>> plan, builder = epoch_plan(cfg, ds, SequentialSampler(6), ONE_HOST, {},
        ...                            settings, 0, None)
        >>> ex = make_executor("thread", worker_spec(cfg, ds), cfg, settings)
        >>> w = JobWindow(plan, Tally(0), ex, depth=2, ordered=True, timeout=None,
        ...               start_state=plan.state())
        >>> [w.get()[0].tolist() for _ in range(3)], w.state()["batches"]
        ([[0, 1], [2, 3], [4, 5]], 3)
        >>> w.close(); ex.close(); builder.close()

    Resources:
        Holds futures; with an inline executor and ``ahead`` not 0, the one-thread
        executor ``start_ahead()`` starts when a thread pays off. :meth:`close`
        cancels the jobs not yet started and ends that thread.

    Errors:
        A job's exception is re-raised by :meth:`get` (a batch of its own is then
        lost, and the next :meth:`get` goes on with the next batch);
        :class:`~stoker.LoaderTimeout` when no batch finishes within ``timeout``.
    """

    def __init__(
        self,
        plan: EpochPlan,
        tally: Tally,
        executor: Executor,
        *,
        depth: int,
        ordered: bool,
        timeout: float | None,
        start_state: dict[str, Any],
        ahead: Iterable[int] = (),
        token: int = 0,
        prefetch: int | None = 0,
        start_ahead: Callable[[], AheadExecutor] | None = None,
    ) -> None:
        self._plan = plan
        self._tally = tally
        self._batches = plan.job_per_batch  # else the plan forms the batches
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
        self._closing: Future[Done] = Future()  # done once closed: wakes every wait
        self._handed = HandedOut(start_state, ahead)  # batches of their own, in any order
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
        # Without workers: batches a thread builds ahead (0: none; None: probe first).
        self._prefetch = prefetch if start_ahead is not None else 0
        self._start_ahead = start_ahead
        self._ahead_executor: AheadExecutor | None = None
        self._probes: list[float] = []  # min(building, the caller's work) per batch
        self.produce_seconds = 0.0  # building batches without workers

    @property
    def mode(self) -> str:
        """Where batches are built without workers: "background thread, n in flight",
        "caller thread" or "caller thread (deciding)"."""
        if self._ahead_executor is not None:
            return f"background thread, {self.depth} in flight"
        return "caller thread (deciding)" if self._prefetch is None else "caller thread"

    @property
    def ahead(self) -> int:
        """Batches built ahead on a thread without workers (0: on the caller's thread)."""
        return self.depth if self._ahead_executor is not None else 0

    def stacks(self) -> str:
        """The stacks of the threads building this window's jobs (workers or the
        prefetch thread), for the watchdog's report."""
        stacks = getattr(self._executor, "stacks", None)
        return str(stacks()) if callable(stacks) else ""

    def in_flight(self) -> list[Job]:
        """The jobs in flight (the one being built on the calling thread included)."""
        jobs = [job for job, _ in list(self._inflight)]
        building = self._building
        if building is not None:
            jobs.insert(0, building)
        return jobs

    def state(self) -> dict[str, Any]:
        """The state after the batches handed out so far."""
        if not self._batches:
            return self._plan.state()
        return self._handed.state()

    def _next_job(self) -> Job | None:
        """The next job to run (None: none now), skipping the batches handed out
        ahead before a restore."""
        while True:
            job = self._plan.next_job(self._token)
            if job is None:
                self._planned_all = True
                if self._ahead_executor is not None:  # its thread ends after the last job
                    self._ahead_executor.finish()
                return None
            if isinstance(job, Wait):
                if not self._inflight:
                    raise RuntimeError("the plan waits for a job, with none in flight")
                return None
            if not self._batches:
                return job
            if self._handed.planned(job):
                return job

    def _top_up(self) -> None:
        while not self._planned_all and len(self._inflight) < self.depth:
            job = self._next_job()
            if job is None:
                return
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
        """
        if not self._closed and self._here is None and len(self._inflight) < self.depth:
            self._top_up()

    def _take(self, deadline: float | None) -> tuple[Job, Future[Done]]:
        """The job whose result comes next: in order (the plan's order), or the first
        to finish of each lane's head (a batch of its own, a stream part)."""
        if self.ordered or not self._batches:
            pair = self._inflight[0] if self._batches else self._wanted()
            if pair is not None:
                future = pair[1]
                if not future.done():
                    self._wait([future], deadline)
                    if not future.done():
                        raise timeout_error(self._timeout)
                return pair
        heads = self._heads()
        finished = [pair for pair in heads if pair[1].done()]
        if not finished:
            self._wait([f for _, f in heads], deadline)
            finished = [pair for pair in heads if pair[1].done()]
            if not finished:
                raise timeout_error(self._timeout)
        return min(finished, key=lambda p: (p[0].part, p[0].seq))

    def _wanted(self) -> tuple[Job, Future[Done]] | None:
        """The job in flight whose result the plan needs next (None: any)."""
        job = self._plan.wants([job for job, _ in self._inflight])
        if job is None:
            return None
        for pair in self._inflight:
            if pair[0] is job:
                return pair
        raise RuntimeError(f"the plan waits for a job not in flight: {job.where}")

    def _heads(self) -> list[tuple[Job, Future[Done]]]:
        """The first job in flight of every lane: every batch of its own is a lane,
        every stream part one (its reads come back in order)."""
        parts: set[int] = set()
        heads = []
        for pair in self._inflight:
            part = pair[0].part
            if part >= 0:
                if part in parts:
                    continue
                parts.add(part)
            heads.append(pair)
        return heads

    def _wait(self, futures: list[Future[Done]], deadline: float | None) -> None:
        """Wait until one of ``futures`` is done, ``deadline`` passes or the window is
        closed (from another thread: then the wait ends the pass)."""
        futures_wait([*futures, self._closing], remaining(deadline), FIRST_COMPLETED)
        if self._closed:
            raise StopIteration

    def _result(self, job: Job, done: Done) -> Item | None:
        """A finished job's batch when it is one (None: all its records skipped);
        else the plan takes it (its batches come from ``plan.ready``)."""
        if self._batches:
            return self._tally.finish(job, done)
        self._tally.count(done)  # the records skipped count in the order they are read
        ended = self._plan.take(job, done)
        if ended is not None:  # a stream part ended: drop the jobs still asking it for more
            for pair in [p for p in self._inflight if p[0].part == ended]:
                self._inflight.remove(pair)
                self._submitted.pop(pair[0].seq, None)
                self._finished_at.pop(pair[0].seq, None)
                pair[1].cancel()  # nothing waits on it; a queued job is dropped unrun
        return None

    def _ready(self) -> Item | None:
        """A batch the plan can hand out now (plans that form their batches)."""
        if self._batches:
            return None
        return self._plan.ready(self._planned_all and not self._inflight)

    def get(self) -> Item:
        """The next item; ``StopIteration`` after the last one."""
        if self._here is not None and not self._inflight:
            if self._prefetch == 0 or (self._prefetch is None and not self._decide()):
                return self._build_here(self._here)
            self._go_ahead(self._prefetch or DEFAULT_DEPTH)
        start = time.perf_counter()
        deadline = None if self._timeout is None else start + self._timeout
        if self._plans_ahead:  # jobs built when asked for never wait for the consumer
            self._count_idle(start)
        try:
            while True:
                if self._closed:
                    raise StopIteration
                item = self._ready()
                if item is not None:
                    return item
                if len(self._inflight) < self.depth:
                    self._top_up()
                    if not self._inflight:
                        item = self._ready()
                        if item is None:
                            raise StopIteration
                        return item
                self._waiting = True
                head = self._inflight[0]
                if isinstance(head[1], DeferredFuture):  # built below, by asking for it
                    job, future = head
                else:
                    job, future = self._take(deadline)  # in flight: Ctrl-C loses nothing
                self._waiting = False
                if self._closed:  # by another thread, while this one waited
                    raise StopIteration
                if head[1] is future:
                    self._inflight.popleft()
                else:
                    self._inflight.remove((job, future))
                if self._submitted:  # workers' jobs: from submit to finish, for the stats
                    submitted = self._submitted.pop(job.seq, start)
                    self.latency_seconds += self._finished_at.pop(job.seq, start) - submitted
                try:
                    done = future.result()
                    if self._ahead_executor is not None:  # built ahead on the thread
                        self.produce_seconds += done.fetch_seconds + done.collate_seconds
                    item = self._result(job, done)
                except CancelledError:
                    raise IteratorFailed(
                        "the loader's workers were closed while this iterator was reading"
                    ) from None
                except BaseException as exc:
                    if self._batches:
                        self._handed.hand_out(job)  # the batch is gone; the next may follow
                        if self._plans_ahead and isinstance(exc, Exception):
                            self._top_up()  # as after a batch (the plan's end is known)
                    del future, exc  # the traceback keeps this frame: no cycle through the future
                    raise
                if self._batches:
                    self._handed.hand_out(job)
                if self._plans_ahead and len(self._inflight) < self.depth:
                    self._top_up()
                if item is not None:
                    if not self._handed.in_order(job):  # it may close a gap
                        return item[0], self.state(), item[2]
                    return item
        except KeyboardInterrupt:
            if not self._waiting:
                self.intact = False
            raise
        finally:
            self._waiting = False
            self._returned_at = time.perf_counter()
            self.wait_seconds += self._returned_at - start

    def _decide(self) -> bool:
        """True once the probes say a thread building ahead pays off."""
        pays = thread_pays_off(self._probes)
        if pays is False:
            self._prefetch = 0
        return bool(pays)

    def _go_ahead(self, depth: int) -> None:
        """From now on, submit the jobs to a thread that builds ``depth`` ahead."""
        if self._start_ahead is None:
            raise RuntimeError("no thread to build ahead on")
        self._ahead_executor = self._executor = self._start_ahead()
        if self._planned_all:
            self._ahead_executor.finish()
        self._here = None
        self._plans_ahead = True
        self.depth = max(1, depth)

    def _build_here(self, executor: InlineExecutor) -> Item:
        """The next item, its jobs planned and built on this thread (inline executors),
        timed: the caller waits while its batch is built."""
        start = time.perf_counter()
        try:
            while True:
                if self._closed:
                    raise StopIteration
                if not self._batches:  # the plan forms the batches
                    item = self._plan.ready(self._planned_all)
                    if item is not None:
                        return item
                if self._planned_all:
                    raise StopIteration
                if executor.closed:
                    raise IteratorFailed(
                        "the loader's workers were closed while this iterator was reading"
                    )
                job = self._next_job()
                if job is None:
                    continue  # no more: the plan's last batches, then the end

                self._building = job
                in_order = True
                try:
                    done = executor.runtime.run(job)
                    if self._batches:
                        item = self._tally.finish(job, done)
                    else:
                        item = self._result(job, done)
                finally:
                    self._building = None
                    if self._batches:  # an error loses it; the next follows
                        in_order = self._handed.hand_out(job)
                if item is not None:
                    if not in_order:  # it may close a gap
                        return item[0], self.state(), item[2]
                    return item
        except KeyboardInterrupt:
            self.intact = False
            raise
        finally:
            end = time.perf_counter()
            self.produce_seconds += end - start
            self.wait_seconds += end - start
            if self._prefetch is None and self._returned_at is not None:
                self._probes.append(min(end - start, start - self._returned_at))
            self._returned_at = end

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
        """Cancel this window's jobs that have not started and wake a ``get()`` waiting
        on another thread, which then ends the pass (idempotent)."""
        self._closed = True
        with contextlib.suppress(InvalidStateError):
            self._closing.set_result(Done(None))
        self._executor.cancel(self._token)
        for _, future in self._inflight:
            cancel_future(future)
        self._inflight.clear()
        if self._ahead_executor is not None:
            self._ahead_executor.close()
