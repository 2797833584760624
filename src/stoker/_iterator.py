"""``LoaderIterator``: one pass over one epoch; it owns the work in flight.

``LoaderIterator.__init__`` reads like the data path of DESIGN.md, one stage a line,
each built from the :class:`~stoker._pass.PassSpec` its loader hands it: the epoch's
plan (stages 2-4, ``stoker._epoch``: which records make each batch, and the state
after it), the executor (stage 5, ``stoker._exec``: inline, thread, process or Ray,
behind one ``Executor`` protocol) and the window of batches in flight (stage 6,
``stoker._window``). Every plan with an executor plans jobs into one
:class:`~stoker._window.JobWindow` (a batch per job, chunks of records filled past
a filter, a stream's parts read by workers); an inline stream is read on the
calling (or prefetch) thread. The iterator sees all of them through
the same few members: ``get()``, ``state()``, ``final_state()`` and ``close()``.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Generic

from typing_extensions import TypeVar

from ._batching.builder import BatchBuilder
from ._epoch.plan import EpochPlan
from ._exec.autotune import Autotune
from ._exec.jobs import Job, Tally
from ._exec.malloc import large_blocks_kept
from ._pass import PassSpec, Reopens
from ._progress import Monitor, stats_while_alive
from ._source_caches import source_caches
from ._state import BATCHES, CARRY, ahead_of
from ._stats import LoaderStats, available_cores
from ._watchdog import Watchdog, describe_jobs, thread_stack, timed_out
from ._window import JobWindow
from .errors import IteratorFailed, LoaderTimeout, StateError, WorkerCrashed

__all__ = ["LoaderIterator", "StateBox"]

B = TypeVar("B", default=Any)


class StateBox:
    """An iterator's latest state, shared with its loader (which reads the box of its
    most recent iterator, without keeping that iterator alive)."""

    __slots__ = ("carry_len", "finished", "keep", "state")

    def __init__(self, state: dict[str, Any] | None) -> None:
        self.state = state
        self.keep: object = None  # what keeps the final state current (a sampler cursor)
        self.carry_len = 0
        self.finished = False  # the iterator ran to its end: state starts the next epoch


class LoaderIterator(Generic[B]):
    """One pass over one epoch of a :class:`DataLoader`.

    Example:
        >>> import json, stoker as sk
        >>> loader = sk.DataLoader(sk.range(0, 6), batch_size=2, shuffle=True, seed=3)
        >>> it = iter(loader)
        >>> first = next(it)
        >>> saved = json.dumps(it.state_dict())
        >>> rest = [b.tolist() for b in it]
        >>> rest == [b.tolist() for b in loader.iter(state=json.loads(saved))]
        True

    Resources:
        Owns the background prefetch thread, if one was started. It ends when the
        epoch is exhausted, on :meth:`close`, on leaving a ``with`` block, or when
        the iterator is garbage collected.

    Errors:
        An exception raised while loading reaches ``next()`` as its own type, with a
        note naming the sample index, batch and epoch. When user code raised it (a
        dataset, a map, a collate function), that batch is lost and the next
        ``next()`` goes on with the following one, as with PyTorch (except for a
        stream read by several workers, or batches filled past a filter, where it
        ends the pass); otherwise later calls raise
        :class:`~stoker.IteratorFailed`;
        :class:`~stoker.LoaderTimeout` when ``timeout`` passes without a batch.
        Ctrl-C (``KeyboardInterrupt``) while ``next()`` waits for workers or the
        prefetch thread loses nothing: the next ``next()`` goes on with the batch it
        was waiting for. Ctrl-C that interrupts a batch being built on the caller's
        thread ends the iterator (:class:`~stoker.IteratorFailed` afterwards); resume
        it with ``loader.iter(state=it.state_dict())``.
    """

    def __init__(
        self, spec: PassSpec, epoch: int, state: dict[str, Any] | None, box: StateBox
    ) -> None:
        self._spec = spec
        self._epoch = epoch
        self._mode = spec.mode
        self._tally = Tally(spec.config.max_errors)  # what workers report
        self._plan, self._builder = spec.plan(epoch, state)  # stages 2-4
        self._executor, self._token, release = spec.executor()  # stage 5
        self._window, tuned, self._keep_going = spec.window(
            self._plan, self._executor, self._token, self._tally, state, epoch
        )  # stage 6
        self._autotune = Autotune.of(self._executor, tuned, self._tally)  # "auto"
        self._inline_since: int | None = None  # the batch from which "auto" built inline
        self._handover = self._autotune.executor if self._autotune is not None else None
        # What is in flight, for the watchdog and LoaderTimeout: it holds the parts,
        # never the iterator (a watched iterator that is dropped is still collected).
        self._in_flight = InFlight(self._window, box, epoch)
        self._watchdog: Watchdog | None = None
        if spec.config.watchdog is not None:  # it looks in while next() runs, from outside
            self._watchdog = Watchdog(spec.config.watchdog, self._in_flight.describe)
        self._finalizer = weakref.finalize(
            self,
            _close_all,
            os.getpid(),
            self._window,
            self._builder,
            self._plan,
            release,
            self._watchdog,
        )
        self._box = box
        start = self._window.state()
        box.state = start
        carry = start.get(CARRY)
        box.carry_len = len(carry) if isinstance(carry, list) else 0
        self._left = _batches_left(spec.loader, start)  # len(it); None when unknown
        self._batches = 0
        self._samples = 0
        self._created = time.perf_counter()
        self._first_batch = 0.0
        self._exhausted = False
        self._failure: BaseException | None = None
        self._monitor: Monitor | None = Monitor(  # progress=True, the stoker logger
            stats_while_alive(weakref.ref(self)),
            total=self._left,
            bar=spec.config.progress,
            log_every=spec.config.log_every,
            desc=f"epoch {epoch}",
        )
        if self._monitor.active:
            weakref.finalize(self, self._monitor.close)  # the bar closes with the iterator
        else:
            self._monitor = None

    @property
    def epoch(self) -> int:
        """The epoch this iterator reads."""
        return self._epoch

    def __iter__(self) -> Iterator[B]:
        return self

    def __next__(self) -> B:
        if self._failure is not None:
            raise IteratorFailed(
                f"this iterator already failed with {type(self._failure).__name__}; resume "
                "after its last good batch with loader.iter(state=it.state_dict())"
            ) from self._failure
        if self._exhausted:
            raise StopIteration
        try:
            batch, state, count = self._watched_get()
        except StopIteration:
            if self._exhausted:  # closed by another thread while this one waited
                raise
            self._exhausted = True
            self._box.state = self._plan.final_state()
            self._box.finished = True
            # The sampler's cursor writes weights set from now on (set_weights) into
            # that state, which starts the next pass: it lives as long as the box.
            self._box.keep = self._plan.final_keep()
            if self._monitor is not None:
                self._monitor.close(finished=True)
            self._finalizer()
            raise
        except LoaderTimeout as exc:  # the batch may still come: next() may be called again
            raise timed_out(exc, self._in_flight.jobs()) from None
        except BaseException as exc:  # Ctrl-C included: never pretend the epoch ended
            if self._keep_going and is_batch_error(exc):
                raise  # that batch is lost, as with PyTorch; the next one follows
            if isinstance(exc, KeyboardInterrupt) and self._window.intact:
                raise  # Ctrl-C while waiting: nothing was lost, next() goes on
            self._failure = exc
            self._finalizer()
            raise
        self._box.state = state
        if self._batches == 0:
            self._first_batch = time.perf_counter() - self._created
        self._batches += 1
        self._samples += count
        if self._monitor is not None:
            self._monitor.tick()
        if self._autotune is not None:
            self._autotune.step(batch)
            self._maybe_go_inline()
        result: B = batch
        return result

    def __len__(self) -> int:
        """The batches this iterator has still to yield in its epoch.

        A fresh iterator has ``len(loader)`` of them (unlike PyTorch's iterators, whose
        length stays ``len(loader)``, it counts down, so a progress bar over a resumed
        iterator shows the right total; ``stoker.torch.DataLoader`` keeps PyTorch's).

        Errors:
            TypeError: the number is not known before reading: a stream, a filter or
                ``sk.pack`` in the pipeline, or ``on_error="skip"`` (see
                ``len(loader)``).
        """
        if self._left is None:
            raise TypeError(
                "this iterator's length is not known before reading: the loader reads a "
                "stream, or batches are filled as records pass (a filter, sk.pack or "
                "on_error='skip'); len(loader) says why"
            )
        return max(0, self._left - self._batches)

    def _maybe_go_inline(self) -> None:
        """Build the next batches on this thread when the tuner chose inline and the
        window of jobs is empty: a window over an inline executor takes over from the
        plan where the workers' window left it (same batches, same states)."""
        if self._autotune is None or not self._autotune.go_inline:
            return
        handover, old = self._handover, self._window
        if handover is None or old is None:  # set together with the autotune
            return
        self._autotune = None
        self._inline_since = self._batches
        self._window = JobWindow(
            self._plan,
            self._tally,
            handover.inline_executor(),
            depth=1,
            ordered=True,
            timeout=None,
            start_state=old.state(),
            token=self._token,
        )
        old.close()
        self._in_flight.window = self._window

    def _watched_get(self) -> tuple[Any, dict[str, Any], int]:
        if self._autotune is not None:
            self._maybe_go_inline()  # after a batch that raised, too
        watchdog = self._watchdog
        if watchdog is None:
            return self._window.get()
        watchdog.begin()
        arrived = False
        try:
            got = self._window.get()
            arrived = True
            return got
        finally:
            watchdog.end(arrived)  # a wait that raised (LoaderTimeout) keeps its report

    def state_dict(self) -> dict[str, Any]:
        """The JSON-serialisable state right after the last batch this iterator yielded.

        After the iterator is exhausted it is the start of the next epoch.
        """
        state = self._box.state
        if state is None:
            raise RuntimeError("an iterator always has a state")
        return state

    def stats(self) -> LoaderStats:
        """Counters and a bottleneck verdict for this iterator so far (see
        :class:`~stoker.LoaderStats`; ``print(it.stats())`` shows the report)."""
        counters = self._builder.counters if self._builder is not None else None
        tally = self._tally
        fetch = tally.fetch_seconds + (counters.fetch_seconds if counters else 0.0)
        collate = tally.collate_seconds + (counters.collate_seconds if counters else 0.0)
        transform = tally.transform_seconds + (counters.transform_seconds if counters else 0.0)
        reads = tally.reads + counters.reads if counters else tally.reads
        skipped = (list(counters.skipped) if counters else []) + tally.skipped
        elapsed = time.perf_counter() - self._created
        w = self._window
        cfg = self._spec.config
        workers = cfg.num_workers if self._mode != "inline" else 0
        sized = False
        if workers and self._handover is not None:  # "auto" may change the thread count
            workers = self._handover.workers
            sized = self._handover.tuner.sizer is not None
        queue = 0.0
        if self._mode != "inline" and self._inline_since is None:
            wait, produce, depth = w.wait_seconds, fetch + collate, w.depth
            where = f"{workers} {self._mode} workers, {w.depth} batches in flight"
            where += "" if w.ordered else ", as they finish"
            queue = max(0.0, w.latency_seconds - tally.work_seconds - tally.transfer_seconds)
        else:  # built without workers (from the start, or since "auto" went inline)
            wait = w.wait_seconds  # production on the caller's thread included
            produce = w.produce_seconds
            where, depth = w.mode, w.ahead
            if workers:
                where = f"{workers} {self._mode} workers read ahead"
                depth = self._spec.settings.depth
        work = tally.work_seconds if workers else produce
        cpu = tally.cpu_seconds
        if not workers and tally.work_seconds > 0:  # inline: measured on some batches
            cpu = min(produce, cpu * produce / tally.work_seconds)
        busy = (work or fetch + collate) / (elapsed * workers) if workers and elapsed > 0 else 0.0
        pool = getattr(self._executor, "pool", None) if self._mode == "inline" else None
        if pool is None and self._builder is not None:
            pool = self._builder.pool
        if self._handover is not None:
            where += f"; {self._handover.describe()}"
        return LoaderStats(
            batches=self._batches,
            samples=self._samples,
            wait_seconds=wait,
            produce_seconds=produce,
            fetch_seconds=fetch,
            collate_seconds=collate,
            elapsed_seconds=elapsed,
            worker_mode=self._mode,
            prefetch=where,
            skipped=skipped,
            recycled_batches=pool.recycled if pool else 0,
            allocated_batches=pool.allocated if pool else 0,
            num_workers=workers,
            worker_utilisation=min(1.0, busy),
            watchdog=self._watchdog.findings if self._watchdog is not None else None,
            transform_seconds=transform,
            transfer_seconds=tally.transfer_seconds,
            queue_seconds=queue,
            work_seconds=work,
            cpu_seconds=cpu,
            system_seconds=tally.system_seconds,
            page_faults=tally.faults,
            allocator_tuned=large_blocks_kept(),
            idle_seconds=w.idle_seconds,
            bytes_moved=tally.nbytes,
            restarts=int(getattr(self._executor, "restarts", 0)),
            depth=depth,
            cpu_count=available_cores(),
            first_batch_seconds=self._first_batch,
            workers_sized=sized,
            inline_since=self._inline_since,
            isolated=self._spec.isolated,
            slowest_batch_seconds=tally.slowest[0],
            slowest_batch=_named(tally.slowest[1]),
            mixture=self._spec.dataset._mixture_report(self._box.state),
            cache_hits=reads.hits + tally.hits,
            cache_misses=reads.misses,
            decoded_bytes=reads.decoded_bytes,
            redecoded_bytes=reads.redecoded_bytes,
            remote_requests=reads.requests,
            remote_retries=reads.retries,
            remote_truncated=reads.truncated,
            remote_bytes=reads.remote_bytes,
            remote_backoff_seconds=reads.backoff_seconds,
            source_caches=source_caches(reads.caches),
        )

    def close(self) -> None:
        """Stop loading and end the prefetch thread (idempotent)."""
        self._exhausted = True
        if self._monitor is not None:
            self._monitor.close()
        self._finalizer()

    def __enter__(self) -> LoaderIterator[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_iterator, (self._spec.loader, self.state_dict()))


def _close_all(
    pid: int,
    window: JobWindow,
    builder: BatchBuilder | None,
    plan: EpochPlan,
    release: Callable[[], None],
    watchdog: Watchdog | None,
) -> None:
    if watchdog is not None:
        watchdog.close()
    if os.getpid() != pid:  # a forked child: the workers and locks are the parent's
        return
    window.close()
    plan.close()
    if builder is not None:
        builder.close()
    release()


def _named(job: Job | None) -> str | None:
    return describe_jobs([job]).strip() if job is not None else None


def _batches_left(loader: Reopens, start: dict[str, Any]) -> int | None:
    """The batches an iterator starting at ``start`` yields, when known before reading."""
    try:
        total = len(loader)
    except TypeError:
        return None
    done = start.get(BATCHES, 0)
    ahead = ahead_of(start)
    return max(0, total - (done if isinstance(done, int) else 0) - len(ahead))


class InFlight:
    """What one pass has in flight, in words: the jobs (batch and sample indices) and
    the stacks reading them, for the watchdog's report and for ``LoaderTimeout``.

    It holds the window of jobs and the state box, never the iterator, so that a
    watched iterator that is dropped is still collected.
    """

    def __init__(self, window: JobWindow, box: StateBox, epoch: int) -> None:
        self.window = window
        self._box, self._epoch = box, epoch

    def jobs(self) -> str:
        """The next batch to be handed out and the jobs in flight, with their samples."""
        done = (self._box.state or {}).get(BATCHES, "?")
        jobs = self.window.in_flight()
        head = f"  next to hand out: batch {done} of epoch {self._epoch}"
        return f"{head}\n{describe_jobs(jobs)}" if jobs else head

    def describe(self, caller: int | None) -> str:
        """:meth:`jobs` and the stacks of whoever reads them: the workers, the prefetch
        thread, or ``caller`` (the thread inside ``next()``) building the batch itself."""
        lines = [self.jobs()]
        stacks = self.window.stacks()
        if stacks:
            lines.append(stacks)
        if caller is not None:
            lines.append(f"the thread in next():\n{thread_stack(caller)}")
        return "\n".join(lines)


def is_batch_error(exc: BaseException) -> bool:
    """True for an error of one batch (raised by user code: a dataset, a map, a
    collate function), after which the next batch can still be loaded.

    Ctrl-C and ``SystemExit``, a crashed worker, a closed loader and a state that
    does not fit end the pass instead.

    Example:
        >>> is_batch_error(ValueError("bad record")), is_batch_error(KeyboardInterrupt())
        (True, False)
    """
    return isinstance(exc, Exception) and not isinstance(
        exc, WorkerCrashed | IteratorFailed | StateError
    )


def _restore_iterator(loader: Reopens, state: dict[str, Any]) -> LoaderIterator[Any]:
    it: LoaderIterator[Any] = loader.iter(state=state)
    return it
