"""The main function of a worker process, and how its errors travel to the parent.

A worker gets its pipeline once (cloudpickled bytes, with its multiprocessing
objects passed at process start), then serves jobs from its pipe
until it is told to stop, its pipe closes, or its parent goes away. It never
decides order or state: it builds what a job names, into the slot the job names.

Messages to the parent: ``("ready", pid, stack fd)``, ``("done", seq, Done, layout,
nbytes)``, ``("error", seq, packed error)`` and ``("init_error", packed error)``. A
batch laid out in a segment of the worker's own (not the job's slot) is passed with
its ``done`` message (``send_with_segment``): the parent gets a descriptor of its own,
so the worker closes its copy at once, and the batch survives the worker's next job
or death.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import pickle
import signal
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from .._shm import Segment, send_with_segment
from ..errors import WorkerError
from .first_batch import PLACED, place_rows
from .inherited import loads_with_inherited
from .jobs import EMPTY, Runtime, WorkerSpec
from .malloc import keep_large_blocks
from .slots import SlotWriter

__all__ = ["PackedError", "pack_error", "worker_main"]

PackedError = tuple[bytes | None, str, str, int | None]
"""(the pickled exception if it survives a round trip, its type and message, the
worker's traceback text, the sample index)."""

_LIFELINE_POLL = 0.5


def pack_error(exc: BaseException) -> PackedError:
    """``exc`` ready to cross to the parent: itself when it can be rebuilt there."""
    text = "".join(traceback.format_exception(exc))
    sample = getattr(exc, "sample_index", None)
    summary = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
    return _travelling(exc), summary, text, sample if isinstance(sample, int) else None


def _travelling(exc: BaseException) -> bytes | None:
    """``exc`` pickled, if the parent can rebuild it from that (else None)."""
    try:
        data: bytes = cloudpickle.dumps(exc)
        pickle.loads(data)
    except Exception:
        return None
    return data


def _watch_lifeline(lifeline: Connection, parent: int) -> None:
    """Exit as soon as the parent goes away (its end of the lifeline closes)."""
    while True:
        try:
            if lifeline.poll(_LIFELINE_POLL):
                lifeline.recv_bytes()
        except (EOFError, OSError):
            os._exit(0)
        if os.getppid() != parent:
            os._exit(0)


def worker_main(
    worker_id: int,
    conn: Connection,
    lifeline: Connection,
    payload: bytes,
    inherited: list[Any] | None = None,
) -> None:
    """Run one worker process until it is stopped (the target of the process).

    ``inherited`` holds the pipeline's multiprocessing objects, passed at process
    start (see ``inherited.py``).
    """
    parent = os.getppid()  # the parent, or the fork server that started this process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    threading.Thread(
        target=_watch_lifeline, args=(lifeline, parent), name="stoker-lifeline", daemon=True
    ).start()
    keep_large_blocks()
    stack_fd = _stack_dump_fd()
    try:
        spec: WorkerSpec = loads_with_inherited(payload, inherited or [])
        del payload, inherited
        writer = SlotWriter(spec.batch_size)
        runtime = Runtime(spec, worker_id, "process", pool=writer)  # type: ignore[arg-type]
        runtime.announce = functools.partial(_announce, conn)  # careful jobs name each record
        runtime.start()
    except BaseException as exc:
        exc.add_note(f"stoker: raised while starting process worker {worker_id}")
        _send(conn, ("init_error", pack_error(exc)))
        return
    _send(conn, ("ready", os.getpid(), stack_fd))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        _, job, slot, retired, slot_known = message
        writer.forget(retired)
        writer.use(slot)
        try:
            done = runtime.run(job)
        except Exception as exc:
            _send(conn, ("error", job.seq, pack_error(exc)))
            continue
        layout: Any = None
        nbytes = 0
        own: Segment | None = None  # the batch's own segment (not the slot): closed below
        if job.kind == "slice" and done.value is not EMPTY:
            # The first batch's slice: its rows written straight into the parent's batch.
            start = time.perf_counter()
            placed = place_rows(conn, _send, done.value)
            if placed is None:
                return
            if placed:
                done.value, layout = None, PLACED
                done.transfer_seconds = time.perf_counter() - start
        if job.kind in ("build", "slice") and done.value is not EMPTY and layout is None:
            # A batch without a slot gets its own segment only while the parent cannot
            # know the size (no slot yet); at the ring's cap it is sent by copy. A
            # slice's records (of the first batch, collated in the parent) always get
            # one when they are plain arrays: not pickled through the pipe.
            start = time.perf_counter()
            own_segment = not slot_known or job.kind == "slice"
            layout, nbytes, own = writer.export(done.value, own=own_segment)
            done.transfer_seconds = time.perf_counter() - start  # the parent adds its part
            if layout is not None:
                done.value = None
        try:
            done.skipped = [(i, s, _portable(e)) for i, s, e in done.skipped]
            try:
                data, passed = _dumps(("done", job.seq, done, layout, nbytes)), own
            except Exception as exc:
                exc.add_note(
                    f"stoker: the batch for {job.where} cannot be sent to the main process"
                )
                data, passed = _dumps(("error", job.seq, pack_error(exc))), None
            sent = _send_bytes(conn, data, passed)
        finally:
            if own is not None:
                own.close()  # once passed, the parent holds a descriptor of its own
        if not sent:
            return


def _announce(conn: Connection, index: int) -> None:
    """Tell the parent which record a careful job reads now (see careful.py)."""
    _send(conn, ("at", index))


def _stack_dump_fd() -> int | None:
    """A memory file that receives every thread's stack on SIGUSR1, or None.

    The parent's watchdog sends SIGUSR1 to a worker that holds a batch for too long
    and reads the file through ``/proc/<pid>/fd``; faulthandler writes it from the
    signal handler, so it works while the worker is stuck in C code too.
    """
    try:
        fd = os.memfd_create("stoker-stacks", os.MFD_CLOEXEC)
        faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)
    except (AttributeError, OSError, RuntimeError):
        return None
    return fd


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles, else a :class:`~stoker.WorkerError` with its text."""
    if _travelling(exc) is not None:
        return exc
    return WorkerError(f"{type(exc).__name__}: {exc}")


def _send(conn: Connection, message: Any) -> bool:
    """Send ``message``; False when the parent is gone."""
    return _send_bytes(conn, _dumps(message))


def _send_bytes(conn: Connection, data: bytes, segment: Segment | None = None) -> bool:
    """Send ``data`` (with ``segment`` passed along); False when the parent is gone."""
    try:
        send_with_segment(conn, data, segment)
    except (BrokenPipeError, EOFError, OSError):
        return False
    return True


def _dumps(message: Any) -> bytes:
    try:
        return pickle.dumps(message, protocol=5)
    except Exception:
        return cloudpickle.dumps(message)  # type: ignore[no-any-return]
