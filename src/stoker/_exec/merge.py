"""One batch built by several workers at once, exactly as one build would give it.

The first batch of a pass is what a cold start waits for: its records are split
across the workers (:func:`split_build`) so that every worker builds a slice of it,
and the slices are joined here, or found not joinable and built again whole. The
thread workers of ``worker_mode="auto"``
(:class:`~stoker._exec.handover.HandoverExecutor`) and the process workers
(:class:`~stoker._exec.processes.ProcessExecutor`) both split it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

import numpy as np

from .._stats import SourceReads
from .executor import cancel_future
from .jobs import Done, Job, WorkerSpec

__all__ = ["CannotMerge", "concat_batches", "joined_done", "splits", "split_build"]


class CannotMerge(Exception):
    """Sub-batches whose concatenation might differ from the whole batch."""


def concat_batches(parts: list[Any]) -> Any:
    """One batch from consecutive sub-batches, exactly as one build would give it.

    Example:
        >>> concat_batches([np.array([1, 2]), np.array([3])]).tolist()
        [1, 2, 3]
        >>> sorted(concat_batches([{"a": np.zeros(1)}, {"a": np.ones(2)}])["a"].tolist())
        [0.0, 1.0, 1.0]

    Raises:
        CannotMerge: when the parts are not arrays of one dtype and row shape (in
            matching dicts or tuples): collating them at once might differ.
    """
    first = parts[0]
    if isinstance(first, np.ndarray):
        for p in parts:
            if not isinstance(p, np.ndarray) or p.dtype != first.dtype:
                raise CannotMerge
            if p.ndim == 0 or p.shape[1:] != first.shape[1:] or p.dtype == object:
                raise CannotMerge
        return np.concatenate(parts)
    if type(first) is dict:
        keys = list(first)
        if any(type(p) is not dict or list(p) != keys for p in parts):
            raise CannotMerge
        return {k: concat_batches([p[k] for p in parts]) for k in keys}
    if type(first) is tuple:
        if any(type(p) is not tuple or len(p) != len(first) for p in parts):
            raise CannotMerge
        return tuple(concat_batches([p[i] for p in parts]) for i in range(len(first)))
    raise CannotMerge


def joined_done(value: Any, parts: list[Done]) -> Done:
    """The :class:`Done` of a batch ``value`` joined from ``parts``: their times summed.

    Example:
        >>> joined_done(None, [Done(1, 0.5, 0.1), Done(2, 0.25, 0.1)]).fetch_seconds
        0.75
    """
    done = Done(value, sum(d.fetch_seconds for d in parts), sum(d.collate_seconds for d in parts))
    done.transform_seconds = sum(d.transform_seconds for d in parts)
    done.reads = sum((d.reads for d in parts), SourceReads())
    done.work_seconds = sum(d.work_seconds for d in parts)
    done.cpu_seconds = sum(d.cpu_seconds for d in parts)
    done.cpu_wait_seconds = sum(d.cpu_wait_seconds for d in parts)
    done.transfer_seconds = sum(d.transfer_seconds for d in parts)
    done.nbytes = sum(d.nbytes for d in parts)
    return done


def splits(spec: WorkerSpec) -> bool:
    """True when a batch of ``spec``'s loader may be built in slices and joined: the
    default collate (whose joined slices are checked to equal the whole batch), and
    no skipped records to account for."""
    return spec.batched and spec.collate_fn is None and spec.on_error == "raise"


def split_build(
    submit: Callable[[Job], Future[Done]], job: Job, workers: int
) -> Future[Done] | None:
    """``job`` (a one-part build) submitted as up to ``workers`` slices, joined into
    one :class:`Done`; None when it has too few records to split.

    The slices keep the job's batch index and description, so an error or a crash in
    one of them names the batch and the record as the whole job would. When the
    slices cannot be joined exactly (see :func:`concat_batches`), the whole job is
    submitted again and its result is the one returned.

    Example:
        >>> import stoker as sk
        >>> from stoker._context import Context
        >>> from stoker._exec.threads import ThreadExecutor
        >>> from stoker._batching.pool import BufferPool
        >>> spec = WorkerSpec(sk.range(10), None, 4, "raise", 0, 2, None, None)
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
    subs = [
        submit(Job(job.seq, "build", ((ctx, p),), job.where, None, len(p), job.token))
        for p in pieces
    ]
    left = [len(subs)]
    lock = threading.Lock()

    def joined(_: Future[Done]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        # The slices' futures are let go here: nothing keeps their buffers (slots of
        # the executor's pool) once the batch is joined.
        finished, subs[:] = list(subs), []
        if any(f.cancelled() for f in finished):
            cancel_future(merged)
            return
        error = next((f.exception() for f in finished if f.exception() is not None), None)
        if error is not None:
            settle(merged, error=error)
            return
        dones = [f.result() for f in finished]
        del finished
        try:
            value = concat_batches([d.value for d in dones])
        except CannotMerge:
            submit(job).add_done_callback(lambda f: copy_future(f, merged))
            return
        settle(merged, joined_done(value, dones))

    for sub in list(subs):
        if sub.cancelled():
            cancel_future(merged)
            return merged
        sub.add_done_callback(joined)
    return merged


def settle(
    future: Future[Done], done: Done | None = None, error: BaseException | None = None
) -> None:
    """Resolve ``future`` unless its reader cancelled it meanwhile."""
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
