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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching.builder import BatchBuilder, add_batch_index
from .._context import SKIP
from .._epoch.jobs import EMPTY, Done, Job
from ..errors import WorkerCrashed

__all__ = ["COLLATING", "crashed_record", "read_carefully"]

COLLATING = -1
"""What a careful worker names once its records are read and it collates them."""

Announce = Callable[[int], None]


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
