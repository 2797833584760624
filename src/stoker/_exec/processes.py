"""``ProcessExecutor``: persistent worker processes fed job by job.

Each worker has its own duplex pipe, so no lock is shared between processes and a
worker killed at any moment cannot leave one held. The parent keeps the queue: a
job goes to a worker the moment it is idle (one job per worker, so a slow record
never holds up jobs queued behind it), from :meth:`submit` or from the results
thread, which reads every pipe and every process sentinel. A sentinel that fires
is a worker that died: it is named in :class:`~stoker.WorkerCrashed` at once, or
replaced and its job sent again under ``restart_workers=True``.

Batches come back as layouts of shared-memory slots, or of a segment the worker
passes with the message (see ``slots.py``); the results thread turns them into NumPy
views before resolving the job's future. The first batch's slices are written by
their workers into one segment the results thread makes and names to them
(``first_batch.py``).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any

from .._shm import receive_with_segment, send_with_segment, sharing_for_workers
from ..errors import IteratorFailed, WorkerCrashed, WorkerError
from .careful import COLLATING, Restarts
from .diagnosis import crash_message, describe_exit, dump_stacks, only_sample, samples_of
from .executor import cancel_future
from .first_batch import PLACED, FirstBatch
from .inherited import dumps_keeping_inherited
from .jobs import Done, Job, WorkerSpec
from .live import track
from .merge import split_build, splits
from .preload import preload
from .queue import CLOSED_WHILE_BUILDING, QueuedExecutor
from .slots import SlotRef, SlotRing, views
from .worker import PackedError, worker_main

__all__ = ["DEFAULT_MAX_RESTARTS", "ProcessExecutor"]

DEFAULT_MAX_RESTARTS = 10
"""Worker replacements an executor makes under ``restart_workers=True`` before raising."""
_GRACE_SECONDS = 1.0  # for a worker to finish its job and stop before SIGTERM
_JOIN_SECONDS = 5.0


class _Worker:
    __slots__ = (
        "at",
        "conn",
        "id",
        "job",
        "lifeline",
        "pid",
        "process",
        "ready",
        "retired",
        "stack_fd",
    )

    def __init__(self, worker_id: int, process: Any, conn: Connection, lifeline: Connection):
        self.id = worker_id
        self.process = process
        self.conn = conn
        self.lifeline = lifeline
        self.pid: int = process.pid
        self.job: tuple[Job, Future[Done], SlotRef | None] | None = None
        self.retired: list[int] = []
        self.ready = False  # it said "ready": it started and unpickled the pipeline
        self.stack_fd: int | None = None  # its file for stack dumps (see worker.py)
        self.at: int | None = None  # the record a careful job reads now (careful.py)


class ProcessExecutor(QueuedExecutor):
    """``spec.num_workers`` processes running jobs of one loader.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 1, None, None)
        >>> with ProcessExecutor(spec, start_method="forkserver") as ex:
        ...     job = Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0")
        ...     ex.submit(job).result(timeout=60).value.tolist()
        [7, 8]

    Resources:
        Owns the worker processes, their pipes, a results thread
        (``stoker-results``) and the slot ring. :meth:`close` (idempotent) stops
        the workers (SIGTERM, then SIGKILL, within 5 s), ends the thread and
        releases the slots. A worker whose parent dies exits within a second (its
        lifeline pipe closes); slot memory is anonymous, so no exit path leaves
        anything in ``/dev/shm``.

    Errors:
        A job's exception reaches its future as its own type when it can be rebuilt
        here (else :class:`~stoker.WorkerError`), with the worker's traceback as a
        note; :class:`~stoker.WorkerCrashed` when a worker dies.
    """

    mode = "process"

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        start_method: str = "forkserver",
        restart: bool = False,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        slot_cap: int = 8,
    ) -> None:
        super().__init__(spec.num_workers)
        self._restarts = Restarts(restart, max_restarts, spec.on_error)
        self._ctx = multiprocessing.get_context(start_method)
        with sharing_for_workers():
            # multiprocessing objects (Value, Lock, Queue) travel as Process arguments.
            met: list[Any] = []  # functions and classes: their imports are preloaded
            self._payload, self._inherited = dumps_keeping_inherited(spec, met)
        if start_method == "forkserver":
            # Workers forked from a server that already imported stoker and the
            # pipeline's modules start without importing them again (preload.py).
            # The main module is not preloaded: a script without a __main__ guard
            # would run its loop in the server. mainless.py makes the server's
            # workers skip re-running it (cloudpickle ships __main__ functions by
            # value, so workers never need it).
            preload(self._ctx, self._payload, met)
        # The payload names the shared segments of spec's in-memory sources by their
        # descriptors here, and a replacement worker attaches them whenever it starts:
        # their owners (the datasets) must live as long as these workers may.
        self._spec = spec
        self._split = splits(spec) and spec.num_workers > 1
        self._last_token = -1  # the latest iterator seen (the lease counts them upwards)
        self._ring = SlotRing(slot_cap)
        self._first: dict[int, FirstBatch] = {}  # a first batch's slice jobs (by id) -> it
        # Jobs read again only to name a crash's record -> the crashed worker's (pid, exit).
        self._first_crash: dict[int, tuple[int, int | None]] = {}
        self._wake_r, self._wake_w = os.pipe()
        self._workers: list[_Worker] = []
        self._dead: list[_Worker] = []  # ended workers, joined by close()
        try:
            for i in range(spec.num_workers):
                self._workers.append(self._spawn(i))
        except BaseException:
            self.close()
            raise
        self._reader = threading.Thread(target=self._read, name="stoker-results", daemon=True)
        self._reader.start()
        track(self)  # closed at exit before multiprocessing's own handler runs

    @property
    def restarts(self) -> int:
        """Workers replaced so far under ``restart_workers=True``."""
        return self._restarts.used

    @property
    def ready(self) -> bool:
        """True once every worker started and unpickled the pipeline."""
        return all(w.ready for w in list(self._workers))

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers."""
        return [w.pid for w in self._workers]

    def _spawn(self, worker_id: int) -> _Worker:
        conn, child_conn = self._ctx.Pipe(duplex=True)
        life_r, life_w = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(  # type: ignore[attr-defined]
            target=worker_main,
            args=(worker_id, child_conn, life_r, self._payload, self._inherited),
            name=f"stoker-worker-{worker_id}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        life_r.close()
        return _Worker(worker_id, process, conn, life_w)

    # -- the parent's side of the queue ---------------------------------------------

    def submit(self, job: Job) -> Future[Done]:
        """Queue ``job``; its future resolves to the worker's :class:`Done`.

        The first batch of each iterator is built by every worker, a slice each, and
        joined (:func:`~stoker._exec.merge.split_build`): a cold start waits for one
        slice, not for a whole batch on one worker, and its rows are written by the
        workers into one shared batch where they can be (:class:`FirstBatch`).
        """
        first = job.token > self._last_token
        self._last_token = max(self._last_token, job.token)
        if first and self._split and job.kind == "build" and len(job.parts) == 1:
            batch = FirstBatch(len(job.parts[0][1]))
            submit = functools.partial(self._submit_slice, batch)
            merged = split_build(submit, job, self.num_workers)
            if merged is not None:
                return merged
        return super().submit(job)

    def _submit_slice(self, batch: FirstBatch, job: Job) -> Future[Done]:
        """Queue a slice of a first batch whose rows its worker may write into ``batch``
        (see first_batch.py); ``batch`` is closed once every slice is over."""
        batch.add(job, job.count)
        with self._cond:
            self._first[id(job)] = batch
        future = super().submit(job)

        def over(_: Future[Done]) -> None:
            with self._cond:
                self._first.pop(id(job), None)
            batch.ended(job)

        future.add_done_callback(over)
        return future

    def _queued(self, job: Job) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        """Give queued jobs to idle workers (called with the lock held)."""
        retired = self._ring.take_retired()
        for worker in self._workers:
            worker.retired.extend(retired)
        for worker in self._workers:
            if worker.job is not None:
                continue
            taken = self._next_for(worker.id)
            if taken is None:
                continue
            job, future = taken
            slot = self._ring.acquire() if job.kind == "build" else None
            worker.job, worker.at = (job, future, slot), None
            message = ("job", job.for_worker(), slot, worker.retired, self._ring.sized)
            worker.retired = []
            # If the worker died, its sentinel reports it with the job it held.
            with contextlib.suppress(OSError):
                worker.conn.send_bytes(pickle.dumps(message, protocol=5))

    # -- the results thread ---------------------------------------------------------

    def _read(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                by_object: dict[Any, tuple[str, _Worker]] = {}
                for worker in self._workers:
                    by_object[worker.conn] = ("conn", worker)
                    by_object[worker.process.sentinel] = ("sentinel", worker)
            ready = wait([*by_object, self._wake_r])
            for obj in ready:
                if obj == self._wake_r:
                    os.read(self._wake_r, 4096)
                    continue
                kind, worker = by_object[obj]
                if worker not in self._workers:
                    continue  # replaced earlier in this round
                if kind == "sentinel" or not self._receive(worker):
                    self._died(worker)

    def _receive(self, worker: _Worker) -> bool:
        """Handle one message from ``worker``; False when its pipe is closed."""
        start = time.perf_counter()
        try:
            # A batch in a segment of the worker's own comes with its descriptor: it
            # stays valid whatever the worker does next (its next job, or dying).
            raw, passed = receive_with_segment(worker.conn)
            message = pickle.loads(raw)
        except (EOFError, OSError):
            return False
        tag = message[0]
        if tag == "init_error":
            exc = self._rebuild(message[1], worker, None)
            self._break(exc)
            with self._cond:
                held, worker.job = worker.job, None
            if held is not None:
                held[1].set_exception(exc)
            return True
        if tag == "at":  # a careful job names the record it reads now
            worker.at = message[1]
            return True
        if tag == "ready":
            worker.ready = True
            worker.stack_fd = message[2] if len(message) > 2 else None
            return True
        if tag == "rows":  # a first batch's slice asks where its rows go
            with self._cond:
                held = worker.job
                batch = self._first.get(id(held[0])) if held is not None else None
                reply: tuple[Any, ...] = ("send",)
                segment = None
                if batch is not None and held is not None:
                    reply, segment = batch.answer(held[0], message[1])
                if not self._closed:  # (close() sends "stop" under the same lock)
                    with contextlib.suppress(OSError):
                        try:
                            data = pickle.dumps(reply, protocol=5)
                            send_with_segment(worker.conn, data, segment)
                        except RuntimeError:  # every slice ended meanwhile: nothing sent
                            worker.conn.send_bytes(pickle.dumps(("send",), protocol=5))
            return True
        with self._cond:
            held, worker.job = worker.job, None
        if held is None:
            return True
        job, future, slot = held
        if tag == "done":
            _, _, done, layout, nbytes = message
            if nbytes and job.kind == "build":  # (a slice is a part of a batch)
                self._ring.note_size(nbytes)
            if layout == PLACED:  # a first batch's slice, written into its rows
                with self._cond:
                    batch = self._first[id(job)]
                done.value = rows = batch.rows(job)
                nbytes = rows.nbytes
            elif layout is not None and passed is not None:
                done.value = views(passed.array, layout)  # the views keep the mapping
            elif layout is not None and slot is not None:
                done.value = self._ring.view(slot, layout)
            done.transfer_seconds += time.perf_counter() - start  # for the stats
            done.nbytes = len(raw) + (nbytes if layout is not None else 0)
            result: Done | BaseException = done
            if job.careful is not None and not self._restarts.restart:  # only to name it
                result = self._not_again(job)
        else:
            result = self._rebuild(message[2], worker, job)
        if slot is not None:
            self._ring.release(slot)
        # The worker's next job first: resolving the future runs its callbacks here
        # (the first batch's slices are collated by the last one to arrive).
        with self._cond:
            self._dispatch()
        if isinstance(result, WorkerCrashed):
            future.set_exception(result)
            self._break(result)
        elif isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
        del future, held, passed, result
        return True

    def _not_again(self, job: Job) -> WorkerCrashed:
        """The crash of a job that a fresh worker then read record by record without
        one (without ``restart_workers`` it was read again only to name the record)."""
        crash = WorkerCrashed(
            f"{job.careful} while building {job.where}{samples_of(job)}; read again record "
            "by record in a fresh worker, every record loaded: the crash depends on more "
            "than one record, or on what the worker did before" + self._restarts.advice(False),
            batch_index=job.batch_index,
        )
        with self._cond:
            crash.pid, code = self._first_crash.pop(id(job), (None, None))
        crash.signal = -code if code is not None and code < 0 else None
        return crash

    def _rebuild(self, packed: PackedError, worker: _Worker, job: Job | None) -> BaseException:
        data, summary, text, sample = packed
        batch = job.batch_index if job is not None else None
        exc: BaseException | None = None
        if data is not None:
            try:
                exc = pickle.loads(data)
            except Exception:
                exc = None
        if exc is None:
            exc = WorkerError(summary, sample_index=sample, batch_index=batch)
        exc.add_note(
            f"stoker: raised in process worker {worker.id} (pid {worker.pid}); its traceback:\n"
            + text
        )
        try:
            exc.worker_traceback = text  # type: ignore[attr-defined]
            exc.batch_index = batch  # type: ignore[attr-defined]
        except AttributeError:
            pass
        return exc

    def _died(self, worker: _Worker) -> None:
        with self._cond:
            if self._closed or worker not in self._workers:
                return
        while worker.conn.poll(0) and self._receive(worker):
            pass  # results it sent before it died still count
        worker.process.join(1.0)
        code = worker.process.exitcode
        with self._cond:
            held, worker.job = worker.job, None
            if self.closed:
                return
            if held is not None and held[2] is not None:
                self._ring.release(held[2])
            index = self._workers.index(worker)
            _close_conns(worker)
            # It exited (not killed) before it could start: restarting it would loop.
            starting = not worker.ready and self.broken is None and (code is None or code > 0)
            job = held[0] if held is not None else None
            died = f"worker process {worker.id} (pid {worker.pid}) {describe_exit(code)}"
            # Nor is a worker replaced once the executor broke (an earlier worker's crash,
            # or an error reported by worker_init_fn): the next one would die the same way.
            again, replace = None, False
            if not starting and self.broken is None:
                if held is None:  # it died idle
                    replace = self._restarts.replaces_idle
                else:
                    again = self._restarts.again(held[0], died, worker.at, code)
                    replace = again is not None
            if replace:
                if self._restarts.restart:
                    self._restarts.left -= 1
                elif again is not None and again.careful == died:  # raised once it is named
                    self._first_crash[id(again)] = (worker.pid, code)
                self._workers[index] = self._spawn(worker.id)
                self._bury(worker, code)
                if again is not None and held is not None:
                    self._pending.appendleft((again, held[1]))
                self._dispatch()
                return
            del self._workers[index]
            self._bury(worker, code)
            if self.broken is not None:  # it ended after reporting why (worker_init_fn)
                if held is not None:
                    held[1].set_exception(self.broken)
                return
            at = worker.at if job is not None and job.careful is not None else None
            self._first_crash.pop(id(job), None)
            sample = at if at is not None and at != COLLATING else None
            crash = WorkerCrashed(
                crash_message(worker.id, worker.pid, code, job, starting, at)
                + self._restarts.advice(starting, at),
                batch_index=job.batch_index if job is not None else None,
                sample_index=sample if job is None or sample is not None else only_sample(job),
            )
            crash.pid = worker.pid
            crash.signal = -code if code is not None and code < 0 else None
        if held is not None:
            held[1].set_exception(crash)
        self._break(crash)

    def processes(self) -> list[Any]:
        """The ``Process`` handles of the workers, live or ended and not yet joined."""
        return [w.process for w in self._workers + self._dead]

    def stacks(self) -> str:
        """The Python stacks of the workers holding a job (for the watchdog's report)."""
        with self._cond:
            busy = [(w, w.job[0]) for w in self._workers if w.job is not None]
        parts = [
            f"process worker {w.id} (pid {w.pid}), building {job.where}:\n"
            + dump_stacks(w.pid, w.stack_fd)
            for w, job in busy
        ]
        return "\n".join(parts) if parts else "(no process worker holds a job)"

    def _bury(self, worker: _Worker, code: int | None) -> None:
        """Free an ended worker's process handle (its sentinel pipes) now, if it was
        reaped; else keep it for close() to stop and join (called with the lock held)."""
        if code is None:
            self._dead.append(worker)
            return
        with contextlib.suppress(ValueError):
            worker.process.close()
            return
        self._dead.append(worker)

    # -- ending ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop the workers and the results thread; release the slots (idempotent)."""
        if self.foreign:
            return
        with self._cond:
            if self._closed:
                return
            queued = self._take_all()
            held = [w.job for w in self._workers if w.job is not None]
            for worker in self._workers:
                worker.job = None
                with contextlib.suppress(OSError):
                    worker.conn.send_bytes(pickle.dumps(("stop",)))
        for _, future in queued:
            cancel_future(future)
        for _, future, _ in held:
            if not future.done():
                future.set_exception(IteratorFailed(CLOSED_WHILE_BUILDING))
        os.write(self._wake_w, b"x")
        reader = getattr(self, "_reader", None)
        if reader is not None and reader is not threading.current_thread():
            reader.join(_JOIN_SECONDS)
        _stop_processes([w.process for w in self._workers + self._dead])
        for worker in self._workers:
            _close_conns(worker)
        self._ring.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


def _close_conns(worker: _Worker) -> None:
    worker.conn.close()
    worker.lifeline.close()


def _stop_processes(processes: list[Any]) -> None:
    """Let workers stop on their own, then SIGTERM, then SIGKILL: all gone within 5 s."""
    deadline = time.monotonic() + _GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + _JOIN_SECONDS - _GRACE_SECONDS - 0.5
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join(0.5)
    for process in processes:
        with contextlib.suppress(ValueError):  # still running after SIGKILL: reaped later
            process.close()
