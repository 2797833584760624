"""``ThreadExecutor``: worker threads that take jobs from one shared queue.

An idle thread takes the next job, so one slow record holds up only the thread
reading it, never a backlog assigned ahead. The exception is a stream part: its
jobs go to the one thread that owns the part's open cursor. The threads share the process's memory:
batches are built straight into the loader's recycled buffers and handed over as
they are.
"""

from __future__ import annotations

import threading
import time

from .._batching.pool import BufferPool
from ..errors import WorkerError
from .executor import cancel_future
from .jobs import Job, Runtime, WorkerSpec
from .malloc import keep_large_blocks
from .queue import QueuedExecutor

__all__ = ["JOIN_SECONDS", "ThreadExecutor", "contained"]

JOIN_SECONDS = 5.0
"""How long :meth:`close` waits for the workers, all together."""


class ThreadExecutor(QueuedExecutor):
    """``num_workers`` daemon threads running jobs of one loader.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 2, None, None)
        >>> with ThreadExecutor(spec, BufferPool(2, 4)) as ex:
        ...     job = Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0")
        ...     ex.submit(job).result().value.tolist()
        [7, 8]

    Resources:
        Owns its threads (named ``stoker-worker-<i>``). :meth:`close` (idempotent)
        cancels queued jobs, lets each thread finish the record it is reading and
        joins them; the owner calls it when it is closed or garbage collected.

    Errors:
        An exception raised by a job (or by ``worker_init_fn``) is set on the job's
        future, with its traceback.
    """

    mode = "thread"

    def __init__(self, spec: WorkerSpec, pool: BufferPool) -> None:
        super().__init__(spec.num_workers)
        keep_large_blocks()
        self._threads = [
            threading.Thread(
                target=self._work,
                args=(Runtime(spec, i, "thread", pool),),
                name=f"stoker-worker-{i}",
                daemon=True,
            )
            for i in range(spec.num_workers)
        ]
        for thread in self._threads:
            thread.start()

    def _queued(self, job: Job) -> None:
        if job.part >= 0:  # a stream part's job: only its owner may take it
            self._cond.notify_all()
        else:
            self._cond.notify()

    def _work(self, runtime: Runtime) -> None:
        try:
            runtime.start()
        except BaseException as exc:
            exc.add_note(f"stoker: raised by worker_init_fn in thread worker {runtime.info.id}")
            self._break(exc)
            return
        cond, worker_id = self._cond, runtime.info.id
        while True:
            with cond:
                while not self._closed and (taken := self._next_for(worker_id)) is None:
                    cond.wait()
                if self._closed or taken is None:
                    return
                job, future = taken
            try:
                future.set_result(runtime.run(job))
            except BaseException as exc:
                where = f"thread worker {worker_id} while building {job.where}"
                batch = job.seq if job.kind == "build" else None
                future.set_exception(contained(exc, where, batch))
            del future, taken

    def stacks(self) -> str:
        """The Python stack of every worker thread (for the watchdog's report)."""
        from .._watchdog import thread_stack

        return "\n".join(f"thread {t.name}:\n{thread_stack(t)}" for t in self._threads)

    def close(self) -> None:
        """Cancel queued jobs and end the threads (idempotent)."""
        if self.foreign:
            return
        for _, future in self._take_all():
            cancel_future(future)
        with self._cond:
            self._cond.notify_all()
        deadline = time.monotonic() + JOIN_SECONDS
        current = threading.current_thread()
        for thread in self._threads:
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
