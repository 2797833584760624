"""Jobs: what the parent asks an executor for, and what comes back.

The parent process owns order and state; a job only says which records to read.
``build`` jobs make one batch from (context, indices) parts; ``records`` jobs read
the records of one chunk for a plan that fills batches itself (filters, skipping);
``stream`` jobs read the next batch of one part of a stream, on the worker that
owns that part; a ``slice`` job reads the records of a slice of one batch, which the
parent collates with the batch's other slices (a first batch read by every worker); a
``local`` job reads the next batch of a stream read in this
process (its ``read`` holds the stream's cursor: it never crosses to a process).
The plans write jobs; executors (``stoker._exec``) run them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from .._batching.shared_rows import SharedRows
from .._context import SKIP, Context
from .._stats import NO_READS, SourceReads

__all__ = ["EMPTY", "WAIT", "Done", "Job", "Submits", "Wait"]

JobKind = Literal["build", "slice", "records", "stream", "local"]

EMPTY: Any = SKIP
"""The result of a ``build`` job whose records were all skipped."""


class Wait:
    """What a plan's ``next_job`` returns when it has nothing to plan until a job in
    flight finishes (a stream part whose next read waits for its last one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAIT"


WAIT = Wait()
"""The one :class:`Wait`."""


@dataclass(slots=True, eq=False)
class Job:
    """Read ``parts`` (a context and indices each) for batch ``seq`` of epoch ``epoch``.

    ``state`` is the loader state right after this job's batch (None for ``records``
    jobs, whose batches are formed by the parent). ``token`` names the iterator the
    job belongs to. Only the fields a worker needs cross to a process.
    """

    seq: int
    kind: JobKind
    parts: tuple[tuple[Context, np.ndarray], ...]
    where: str
    state: dict[str, Any] | None = None
    count: int = 0
    token: int = 0
    part: int = -1  # stream jobs: the part (and the worker that owns it)
    open_state: dict[str, Any] | None = None  # stream jobs: where the part starts
    read: Callable[[], Done] | None = None  # local jobs: reads in this process
    # slice jobs on threads: the batch its records are written into, and its first row
    into: tuple[SharedRows, int] | None = None
    # Sent again after its worker process crashed: why it died (the job is read
    # record by record, each named first: ``stoker._exec.careful``), and the records
    # that crashed a worker, to skip (``on_error="skip"``).
    careful: str | None = None
    crashed: tuple[int, ...] = ()

    @property
    def batch_index(self) -> int | None:
        """The index of the batch this job builds (or a slice of), None for a chunk of
        records or a stream's read."""
        return self.seq if self.kind in ("build", "slice") else None

    def samples(self) -> list[int]:
        """The sample indices the job reads (none for a stream job: its part's cursor
        decides)."""
        return [int(i) for _, indices in self.parts for i in indices.tolist()]

    def for_worker(self) -> Job:
        """This job without the parent-side state (what is sent to a process)."""
        return Job(
            self.seq,
            self.kind,
            self.parts,
            self.where,
            None,
            self.count,
            self.token,
            self.part,
            self.open_state,
            careful=self.careful,
            crashed=self.crashed,
        )


@dataclass(slots=True)
class Done:
    """What a worker hands back for a job.

    ``value`` is the batch (``EMPTY`` when every record was skipped) for a build
    job, or the list of records (``SKIP`` for removed ones) for a records job.
    ``skipped`` holds (sample index, summary, exception) per record skipped under
    ``on_error="skip"``; the parent counts them against ``max_errors`` in order.
    """

    value: Any
    fetch_seconds: float = 0.0
    collate_seconds: float = 0.0
    # A shared empty tuple by default: made for every batch, no list to make.
    skipped: Sequence[tuple[int, str, BaseException]] = ()
    states: list[dict[str, Any]] | None = None  # stream jobs: the part's state after each item
    count: int = 0  # stream jobs: records read
    # For the stats: time in map functions (part of fetch), the worker's whole time on
    # the job (wall and CPU), and, set by the parent for process workers, the time to
    # receive the batch and the bytes that crossed (pipe and shared memory).
    transform_seconds: float = 0.0
    # What the sources' decode caches and remote reads did: the blocks found decoded
    # as a number (they change every batch), the rest as SourceReads (its hits 0).
    hits: int = 0
    reads: SourceReads = NO_READS
    work_seconds: float = 0.0
    cpu_seconds: float = 0.0
    system_seconds: float = 0.0  # worker jobs: the kernel's part of the time on a CPU
    faults: int = 0  # worker jobs: minor page faults (fresh pages from the kernel)
    transfer_seconds: float = 0.0
    nbytes: int = 0
    cpu_wait_seconds: float = 0.0  # thread workers that measure it: waiting for a CPU


class Submits(Protocol):
    """What a plan needs from an executor: run a job, drop an iterator's jobs."""

    def submit(self, job: Job) -> Future[Done]:
        """Run ``job``; a future of its :class:`Done`."""
        ...

    def cancel(self, token: int) -> None:
        """Drop the jobs of iterator ``token`` that have not started."""
        ...
