"""A job read again record by record after its worker process crashed.

A native crash (a segfault in a decoder, an abort) kills the worker without a word:
the parent knows the batch it held, not the record. When a worker dies holding a
job of records (a batch, a slice of one, a filter's chunk), the process executor
starts a fresh worker and sends the job again, marked careful (``Job.careful``
holds the crash's text). The fresh worker reads its records one at a time and names
each one to the parent before reading it (:func:`read_carefully`), so a crash that
comes again names its record. Under ``on_error="skip"`` (with
``restart_workers=True``) the job is sent once more with that record in
``Job.crashed``: it is skipped, counted against ``max_errors`` like a record that
raised, and the batch is made of the others.

Nothing of this runs before a crash: the usual read is the builder's, batch at once.
:class:`Restarts` decides, crash by crash, what a fresh worker is sent (and says
what to do in the error when nothing is).
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching.builder import BatchBuilder, add_batch_index
from .._context import SKIP
from .._epoch.jobs import EMPTY, Done, Job
from ..errors import WorkerCrashed

__all__ = ["COLLATING", "Restarts", "crashed_record", "read_carefully"]

COLLATING = -1
"""What a careful worker names once its records are read and it collates them."""

Announce = Callable[[int], None]

_NATIVE_CRASHES = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}
)
"""The signals a worker's own native code dies of (not a kill from outside)."""


class Restarts:
    """What a process executor does after a worker died: the job a fresh worker is
    sent, or nothing (the crash is raised), under ``restart_workers`` (``restart``),
    ``max_restarts`` and ``on_error``.

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> job = Job(3, "build", ((Context(), np.array([5, 6])),), "batch 3")
        >>> Restarts(False, 10, "raise").again(job, "worker 0 died", None, -11).careful
        'worker 0 died'
    """

    def __init__(self, restart: bool, max_restarts: int, on_error: str) -> None:
        self.restart = restart
        self.left = max_restarts
        self._max = max_restarts
        self._skips = on_error == "skip"

    @property
    def used(self) -> int:
        """Workers replaced so far under ``restart_workers=True``."""
        return self._max - self.left

    @property
    def replaces_idle(self) -> bool:
        """True when a worker that died without a job is to be replaced."""
        return self.restart and self.left > 0

    def again(self, job: Job, died: str, at: int | None, code: int | None) -> Job | None:
        """What to send a fresh worker after one died (``died``, exit ``code``) holding
        ``job``, or None to raise :class:`~stoker.WorkerCrashed`.

        A job of records is read again record by record, so that a crash that comes
        again names its record: under ``restart_workers=True`` to recover; without it
        only after a native crash of the worker's own (a segfault, an abort: the
        record's doing, not a kill from outside), to name the record in the error. A
        careful job that crashed again at a record (``at``) is sent once more without
        it under ``on_error="skip"``.
        """
        if self.restart and self.left <= 0:
            return None
        of_records = job.kind in ("build", "slice", "records") and bool(job.samples())
        if job.careful is None:
            native = code is not None and -code in _NATIVE_CRASHES
            if of_records and (self.restart or (native and len(job.samples()) > 1)):
                return dataclasses.replace(job, careful=died)
            return job if self.restart else None  # a stream's read: sent as it was
        if not self.restart:
            return None  # read again only to name the record: it is named
        if at is not None and at != COLLATING and self._skips:
            return dataclasses.replace(job, careful=died, crashed=(*job.crashed, at))
        return dataclasses.replace(job, careful=died)  # until max_restarts runs out

    def advice(self, starting: bool, at: int | None = None) -> str:
        """What to do about a crash: ``at`` is the record a careful job crashed at."""
        if starting:
            return ""
        record = at is not None and at != COLLATING
        if self.restart and self.left <= 0:
            if record:
                todo = f"fix what sample {at} makes crash, or leave it out (on_error='skip')"
            else:
                todo = "look for the record that kills them (memory, a C extension)"
            return (
                f"; workers were already replaced max_restarts={self._max} times: "
                f"{todo}, or raise max_restarts="
            )
        if record:
            return (
                f"; fix what sample {at} makes crash (memory, a C extension), or leave it "
                "out: on_error='skip' with restart_workers=True skips the records that "
                "crash a worker"
            )
        return (
            "; pass restart_workers=True to replace crashed workers and re-issue their "
            "jobs, or look for the record that kills it (memory, a C extension)"
        )


def crashed_record(job: Job, sample: int) -> WorkerCrashed:
    """The error a record that crashed a worker is skipped with (``Job.crashed``).

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> job = Job(3, "build", ((Context(), np.array([5, 6])),), "batch 3", careful="died")
        >>> str(crashed_record(job, 6))
        'sample 6 of batch 3 crashed a worker process: died'
    """
    return WorkerCrashed(
        f"sample {sample} of {job.where} crashed a worker process: {job.careful}",
        sample_index=sample,
        batch_index=job.batch_index,
    )


def read_carefully(builder: BatchBuilder, job: Job, announce: Announce) -> Done:
    """``job``'s value read record by record, each named by ``announce`` before it is
    read (:data:`COLLATING` before the records of a batch are collated); the records
    in ``job.crashed`` are skipped as :func:`crashed_record` errors.

    The value is what the batch-at-once read gives: a ``build`` job's batch (``EMPTY``
    when every record was skipped), or the records of a chunk or a slice.
    """
    start = time.perf_counter()
    counters = builder.counters
    before = len(counters.errors)
    records: list[Any] = []
    crashed = set(job.crashed)
    for ctx, indices in job.parts:
        for index in indices.tolist():
            announce(index)
            if index in crashed:
                error = crashed_record(job, index)
                counters.skipped.append((index, f"{type(error).__name__}: {error}"))
                counters.errors.append(error)
                records.append(SKIP)
                continue
            try:
                (record,) = builder.records(ctx, np.array([index], dtype=np.int64), job.where)
            except Exception as exc:
                if job.batch_index is not None:
                    add_batch_index(exc, job.batch_index)
                raise
            records.append(record)
    fetch = time.perf_counter() - start
    value: Any = records
    if job.kind == "build":
        kept = [r for r in records if r is not SKIP]
        announce(COLLATING)
        try:
            value = builder.collate(kept) if kept else EMPTY
        except Exception as exc:
            add_batch_index(exc, job.seq)
            raise
    skipped = [
        (index, summary, exc)
        for (index, summary), exc in zip(
            counters.skipped[before:], counters.errors[before:], strict=True
        )
    ]
    return Done(value, fetch, time.perf_counter() - start - fetch, skipped)
