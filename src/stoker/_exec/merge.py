"""One batch read by several workers at once, exactly as one build would give it.

The first batch of a pass is what a cold start waits for. Its records are split
across the workers (:func:`split_build`): every worker reads and transforms a slice
of them, and the slices' records are collated together, once, by the default
collate, which is what one worker would have done with the whole batch (process
workers write plain-array rows straight into one shared batch instead, see
``first_batch.py``; the collate then only joins what could not be). The thread
workers of ``worker_mode="auto"`` (:class:`~stoker._exec.handover.HandoverExecutor`)
and the process workers (:class:`~stoker._exec.processes.ProcessExecutor`) both
split it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

import numpy as np

from .._batching.builder import add_batch_index, add_location
from .._batching.shared_rows import PlacedSlice, SharedRows
from .._collate import default_collate
from .._dataset import Dataset
from .._stats import SourceReads
from .executor import cancel_future
from .first_batch import PlacedRows
from .jobs import Done, Job, WorkerSpec

__all__ = ["copy_future", "joined_done", "settle", "split_build", "splits"]


def joined_done(value: Any, parts: list[Done]) -> Done:
    """The :class:`Done` of a batch ``value`` joined from ``parts``: their times summed.

    Example:
        >>> joined_done(None, [Done(1, 0.5, 0.1), Done(2, 0.25, 0.1)]).fetch_seconds
        0.75
    """
    done = Done(value, sum(d.fetch_seconds for d in parts), sum(d.collate_seconds for d in parts))
    done.transform_seconds = sum(d.transform_seconds for d in parts)
    done.hits = sum(d.hits for d in parts)
    done.reads = sum((d.reads for d in parts), SourceReads())
    done.work_seconds = sum(d.work_seconds for d in parts)
    done.cpu_seconds = sum(d.cpu_seconds for d in parts)
    done.system_seconds = sum(d.system_seconds for d in parts)
    done.faults = sum(d.faults for d in parts)
    done.cpu_wait_seconds = sum(d.cpu_wait_seconds for d in parts)
    done.transfer_seconds = sum(d.transfer_seconds for d in parts)
    done.nbytes = sum(d.nbytes for d in parts)
    return done


def splits(spec: WorkerSpec) -> bool:
    """True when a batch of ``spec``'s loader is read record by record and collated by
    the default collate, with no record to skip: its records may then be read in
    slices by several workers and collated together.

    A source that reads whole batches at once (arrays, tables: they override
    ``Dataset._gather``) is left whole; it is fast already, and its batch is not built
    from records.

    Example:
        >>> import stoker as sk
        >>> spec = WorkerSpec(sk.range(10).map(abs), None, 4, "raise", 0, 2, None, None)
        >>> splits(spec), splits(WorkerSpec(sk.range(10), None, 4, "raise", 0, 2, None, None))
        (True, False)
    """
    dataset = spec.dataset
    return (
        spec.batched
        and spec.collate_fn is None
        and spec.on_error == "raise"
        and isinstance(dataset, Dataset)
        and not dataset.may_skip
        and type(dataset)._gather is Dataset._gather
    )


def split_build(
    submit: Callable[[Job], Future[Done]], job: Job, workers: int, shared: bool = False
) -> Future[Done] | None:
    """``job`` (a one-part build) read as up to ``workers`` slices of records, collated
    together into one :class:`Done`; None when it has too few records to split.
    With ``shared`` (workers that share this process's memory: threads), the slices
    write their records straight into one batch as they are made (see
    :mod:`~stoker._batching.shared_rows`).

    The slices keep the job's batch index and description, so an error or a crash in
    one of them names the batch and its records as the whole job would. The records
    are collated on the thread that receives the last slice.

    Example:
        >>> import stoker as sk
        >>> from stoker._context import Context
        >>> from stoker._exec.threads import ThreadExecutor
        >>> from stoker._batching.pool import BufferPool
        >>> spec = WorkerSpec(sk.range(10).map(abs), None, 4, "raise", 0, 2, None, None)
        >>> with ThreadExecutor(spec, BufferPool(4, 4)) as ex:
        ...     job = Job(0, "build", ((Context(), np.arange(4)),), "batch 0")
        ...     split_build(ex.submit, job, 2).result().value.tolist()
        [0, 1, 2, 3]
    """
    ((ctx, indices),) = job.parts
    pieces = [p for p in np.array_split(indices, workers) if len(p)]
    if len(pieces) < 2:
        return None
    merged: Future[Done] = Future()
    rows = SharedRows(len(indices)) if shared else None
    firsts = np.cumsum([0] + [len(p) for p in pieces[:-1]]).tolist()
    subs = [
        submit(
            Job(
                job.seq,
                "slice",
                ((ctx, p),),
                job.where,
                None,
                len(p),
                job.token,
                into=None if rows is None else (rows, first),
            )
        )
        for p, first in zip(pieces, firsts, strict=True)
    ]
    del rows  # the slices hold it, and the batch once joined
    left = [len(subs)]
    lock = threading.Lock()

    def joined(_: Future[Done]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        finished, subs[:] = list(subs), []  # nothing keeps the slices once joined
        if any(f.cancelled() for f in finished):
            cancel_future(merged)
            return
        error = next((f.exception() for f in finished if f.exception() is not None), None)
        if error is not None:
            settle(merged, error=error)
            return
        dones = [f.result() for f in finished]
        del finished
        start = time.perf_counter()
        try:
            value = _joined_value([done.value for done in dones])
        except Exception as exc:
            add_location(exc, None, job.where)
            add_batch_index(exc, job.seq)
            settle(merged, error=exc)
            return
        done = joined_done(value, dones)
        done.collate_seconds += time.perf_counter() - start
        settle(merged, done)

    for sub in list(subs):
        if sub.cancelled():
            cancel_future(merged)
            return merged
        sub.add_done_callback(joined)
    return merged


def _joined_value(slices: list[Any]) -> Any:
    """The batch of the slices' records, collated once; when every slice was written
    into one shared batch by its worker (process workers, see first_batch.py; threads,
    see shared_rows.py), that batch as it lies."""
    if all(isinstance(s, PlacedSlice) for s in slices):
        return slices[0].shared.batch()
    placed = [s for s in slices if isinstance(s, PlacedRows)]
    if len(placed) == len(slices) and all(p.base is placed[0].base for p in placed):
        return placed[0].batch()
    records = [
        r for s in slices for r in (s.records() if isinstance(s, PlacedRows | PlacedSlice) else s)
    ]
    return default_collate(records)


def settle(
    future: Future[Done], done: Done | None = None, error: BaseException | None = None
) -> None:
    """Resolve ``future`` unless its reader cancelled it (or ``close()`` failed it)
    meanwhile."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(done)  # type: ignore[arg-type]
    except InvalidStateError:
        pass


def copy_future(source: Future[Done], into: Future[Done]) -> None:
    """Resolve ``into`` as ``source`` was resolved (a done-callback of ``source``)."""
    if source.cancelled():
        cancel_future(into)
        return
    error = source.exception()
    if error is not None:
        settle(into, error=error)
    else:
        settle(into, source.result())
