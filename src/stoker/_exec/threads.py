"""``ThreadExecutor``: worker threads that take jobs from one shared queue.

An idle thread takes the next job, so one slow record holds up only the thread
reading it, never a backlog assigned ahead. The exception is a stream part: its
jobs go to the one thread that owns the part's open cursor. The threads share the process's memory:
batches are built straight into the loader's recycled buffers and handed over as
they are. The number of threads may change while they run
(:meth:`ThreadExecutor.resize`, for ``num_workers="auto"``): that changes only who
runs the jobs, never a job.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import replace

from .._batching.pool import BufferPool
from ..errors import IteratorFailed, WorkerError
from .executor import cancel_future
from .jobs import Done, Job, Runtime, WorkerSpec
from .malloc import keep_large_blocks
from .merge import settle
from .queue import CLOSED_WHILE_BUILDING, QueuedExecutor

__all__ = ["JOIN_SECONDS", "ThreadExecutor", "contained"]

JOIN_SECONDS = 5.0
"""How long :meth:`close` waits for the workers, all together."""


class ThreadExecutor(QueuedExecutor):
    """``num_workers`` daemon threads running jobs of one loader; :meth:`resize` changes
    how many.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 2, None, None)
        >>> with ThreadExecutor(spec, BufferPool(2, 4)) as ex:
        ...     job = Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0")
        ...     ex.submit(job).result().value.tolist()
        [7, 8]

    Resources:
        Owns its threads (named ``stoker-worker-<i>``, and ``stoker-grow`` while
        :meth:`resize` starts new ones). :meth:`close` (idempotent)
        cancels queued jobs, lets each thread finish the record it is reading and
        joins them; the owner calls it when it is closed or garbage collected. A
        thread that :meth:`resize` sends away finishes its job and ends; the next
        :meth:`resize` or :meth:`close` joins it.

    Errors:
        An exception raised by a job (or by ``worker_init_fn``) is set on the job's
        future, with its traceback.
    """

    mode = "thread"

    def __init__(
        self,
        spec: WorkerSpec,
        pool: BufferPool,
        *,
        cpu_wait: bool = False,
        tune_allocator: bool = False,
    ) -> None:
        super().__init__(spec.num_workers)
        if tune_allocator:  # the user's process: only when asked (DataLoader(tune_allocator=))
            keep_large_blocks()
        self._spec, self._pool, self._cpu_wait = spec, pool, cpu_wait
        self._count = spec.num_workers  # threads wanted; ids 0 .. count - 1
        self._threads: dict[int, threading.Thread] = {}  # by worker id, while it takes jobs
        self._gone: list[threading.Thread] = []  # sent away by resize(), to be joined
        self._running: dict[int, Future[Done]] = {}  # worker id -> the job it builds
        self._sizing = threading.Lock()  # held while threads start: close() waits for them
        self._grower: threading.Thread | None = None  # starts the threads resize() adds
        self._grow()

    @property
    def workers(self) -> int:
        """The number of threads taking jobs (those sent away finish their job first)."""
        return self._count

    def _grow(self) -> None:
        """Start the workers below the count that are not running (outside the job
        lock, so that the new threads need not wait for it one by one to start).

        The new threads take no job until all of them have started: each start waits
        for the new thread to run, and threads already reading records would make
        every one of those waits a wait for the GIL (growing by 120 threads took
        ~200 ms that way on 2 busy cores, against ~10 ms).
        """
        started = threading.Event()
        try:
            self._start_new(started)
        finally:
            started.set()  # the new threads' wait ends whatever happened here

    def _start_new(self, started: threading.Event) -> None:
        with self._sizing:
            with self._cond:
                if self._closed:
                    return
                new = []
                for i in range(self._count):
                    if i in self._threads:  # a thread sent away has left this map already
                        continue
                    # Its WorkerInfo says how many threads run as it starts.
                    spec = replace(self._spec, num_workers=max(self._count, i + 1))
                    runtime = Runtime(spec, i, "thread", self._pool, cpu_wait=self._cpu_wait)
                    self._threads[i] = threading.Thread(
                        target=self._work,
                        args=(runtime, started),
                        name=f"stoker-worker-{i}",
                        daemon=True,
                    )
                    new.append(self._threads[i])
            for thread in new:
                thread.start()

    def resize(self, count: int) -> None:
        """Run ``count`` threads (at least one) from now on.

        New threads start at once, from a thread of their own (``workers`` says the
        new count at once); threads past the count finish the job they are on and
        end. Not for an executor that reads stream parts: a part's jobs go to the
        thread that owns its cursor.

        Example:
            >>> import stoker as sk
            >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 2, None, None)
            >>> with ThreadExecutor(spec, BufferPool(2, 4)) as ex:
            ...     ex.resize(5); grown = ex.workers
            ...     ex.resize(1)
            ...     grown, ex.workers
            (5, 1)
        """
        count = max(1, count)
        if self.foreign:
            return
        with self._cond:
            grows = count > self._count
            self._count = count
            self._cond.notify_all()  # idle threads past the count end now
        if grows:
            # Started from a thread of its own: starting many threads waits for each
            # one to run, and the caller (the consumer's next()) need not wait for that.
            self._join_grower()
            self._grower = threading.Thread(target=self._grow, name="stoker-grow", daemon=True)
            self._grower.start()
        else:  # (joining waits for the grower's lock: threads sent away are joined later)
            self._join_gone(0.0)

    def _join_grower(self) -> None:
        grower = self._grower
        if grower is not None and grower is not threading.current_thread():
            grower.join()

    def _join_gone(self, seconds: float) -> None:
        """Join the threads sent away that have ended (within ``seconds``, all together)."""
        deadline = time.monotonic() + seconds
        with self._sizing:  # close() sees every thread: here, or still in the list
            with self._cond:
                gone, self._gone = self._gone, []
            left = []
            for thread in gone:
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    left.append(thread)
            with self._cond:
                self._gone.extend(left)

    def _queued(self, job: Job) -> None:
        if job.part >= 0:  # a stream part's job: only its owner may take it
            self._cond.notify_all()
        else:
            self._cond.notify()

    def _work(self, runtime: Runtime, started: threading.Event) -> None:
        started.wait()  # set by the thread that starts this one, once it has started all
        try:
            runtime.start()
        except BaseException as exc:
            exc.add_note(f"stoker: raised by worker_init_fn in thread worker {runtime.info.id}")
            self._break(exc)
            return
        try:
            cond, worker_id = self._cond, runtime.info.id
            while True:
                with cond:
                    # The job done last (none at first) is no longer running: one lock
                    # a job, shared with the consumer's submits.
                    self._running.pop(worker_id, None)
                    while True:
                        if self._closed:
                            return
                        if worker_id >= self._count:  # sent away by resize()
                            self._leave(worker_id)
                            return
                        if (taken := self._next_for(worker_id)) is not None:
                            break
                        cond.wait()
                    job, future = taken
                    self._running[worker_id] = future
                try:
                    settle(future, runtime.run(job))  # close() may have failed it meanwhile
                except BaseException as exc:
                    where = f"thread worker {worker_id} while building {job.where}"
                    batch = job.batch_index
                    settle(future, error=contained(exc, where, batch))
                del future, taken
        finally:
            runtime.stop()

    def _leave(self, worker_id: int) -> None:
        """Worker ``worker_id`` ends (lock held). No wake-up meant for a job is lost
        with it: ``resize`` woke every idle thread when it sent this one away, and a
        thread past the count never waits again."""
        self._gone.append(self._threads.pop(worker_id))

    def _all_threads(self) -> list[threading.Thread]:
        with self._cond:
            return [*self._threads.values(), *self._gone]

    def stacks(self) -> str:
        """The Python stack of every worker thread (for the watchdog's report)."""
        from .._watchdog import thread_stack

        return "\n".join(f"thread {t.name}:\n{thread_stack(t)}" for t in self._all_threads())

    def close(self) -> None:
        """Cancel queued jobs, fail the jobs being built (whoever waits for them is
        woken with :class:`~stoker.IteratorFailed`) and end the threads (idempotent).

        A thread inside a record that does not return cannot be stopped: it is waited
        for up to ``JOIN_SECONDS`` and left behind as a daemon thread.
        """
        if self.foreign:
            return
        for _, future in self._take_all():
            cancel_future(future)
        with self._cond:
            running = list(self._running.values())
            self._cond.notify_all()
        for future in running:
            settle(future, error=IteratorFailed(CLOSED_WHILE_BUILDING))
        self._join_grower()  # it starts no thread once closed
        deadline = time.monotonic() + JOIN_SECONDS
        current = threading.current_thread()
        with self._sizing:  # threads still starting have started
            threads = self._all_threads()
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))


def contained(exc: BaseException, where: str, batch_index: int | None = None) -> BaseException:
    """What the caller sees of ``exc``, raised by user code on a worker or prefetch thread.

    An ``Exception`` is itself, and so is a ``KeyboardInterrupt`` (it ends the pass
    as Ctrl-C does). ``SystemExit`` (``sys.exit()`` in a map function) and the other
    exceptions that end a program would, re-raised in the training loop, end the
    training process: they become a :class:`~stoker.WorkerError` instead, with
    ``exc`` as its ``__cause__``.

    Example:
        >>> type(contained(SystemExit(2), "thread worker 0")).__name__
        'WorkerError'
    """
    if isinstance(exc, Exception | KeyboardInterrupt):
        return exc
    error = WorkerError(
        f"{type(exc).__name__}({exc}) was raised in {where}: sys.exit() (or raising "
        f"{type(exc).__name__}) in a map function or a dataset would end the training "
        "process; raise an ordinary exception to report a bad record",
        batch_index=batch_index,
    )
    error.__cause__ = exc
    return error
