"""Jobs: the unit of work a worker does, and the code that does it in any worker.

The parent process owns order and state; a job only says which records to read.
``build`` jobs make one batch from (context, indices) parts; ``records`` jobs read
the records of one chunk for a plan that fills batches itself (filters, skipping);
``stream`` jobs read the next batch of one part of a stream, on the worker that
owns that part (the part's cursor lives there between jobs).
The :class:`Runtime` of a worker turns a job into a :class:`Done`, the same way in
a thread or a process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._batching.builder import BatchBuilder, add_batch_index, add_location
from .._batching.pool import BufferPool
from .._dataset import Dataset
from .._epoch.jobs import EMPTY, Done, Job
from .._iterdataset import IterDataset, StreamCursor
from .._reads import NO_READS, SourceReads, thread_counts
from .._worker_info import WorkerInfo, set_worker_info, worker_seed
from .careful import read_carefully
from .schedstat import CpuWaitClock
from .usage import KernelUsage

__all__ = ["EMPTY", "Done", "Job", "Runtime", "Tally", "WorkerSpec"]


class Tally:
    """The parent's sums of what workers report: time spent, records skipped.

    Skipped records count against ``max_errors`` in the order their batches are
    handed out; the one past the limit is raised. (Kept apart from the iterator so
    that the job window holding :meth:`finish` does not keep the iterator alive.)
    """

    def __init__(self, max_errors: int) -> None:
        self.max_errors = max_errors
        self.fetch_seconds = 0.0
        self.collate_seconds = 0.0
        self.transform_seconds = 0.0
        self.reads = NO_READS
        self.hits = 0  # blocks found decoded (not in reads: see Done.hits)
        self.work_seconds = 0.0
        self.cpu_seconds = 0.0
        self.system_seconds = 0.0  # of cpu_seconds, in the kernel
        self.faults = 0  # minor page faults the jobs took
        self.cpu_wait_seconds = 0.0
        self.transfer_seconds = 0.0
        self.nbytes = 0
        self.skipped: list[tuple[int, str]] = []
        # The batch that took longest, the first one left out: its time includes
        # opening the sources and warming their caches (the report's first batch).
        self.slowest: tuple[float, Job | None] = (0.0, None)
        self.finished = 0  # batches finished

    def count(self, done: Done) -> None:
        """Add a worker's timings and skipped records."""
        self._add_times(done)
        if not done.skipped:
            return
        for index, summary, exc in done.skipped:
            if len(self.skipped) >= self.max_errors:
                exc.add_note(
                    f"stoker: on_error='skip' already skipped max_errors={self.max_errors} records"
                )
                raise exc
            self.skipped.append((index, summary))

    def _add_times(self, done: Done) -> None:
        self.fetch_seconds += done.fetch_seconds
        self.collate_seconds += done.collate_seconds
        self.transform_seconds += done.transform_seconds
        self.reads += done.reads
        self.hits += done.hits
        self.work_seconds += done.work_seconds
        self.cpu_seconds += done.cpu_seconds
        self.system_seconds += done.system_seconds
        self.faults += done.faults
        self.cpu_wait_seconds += done.cpu_wait_seconds
        self.transfer_seconds += done.transfer_seconds
        self.nbytes += done.nbytes

    def finish(self, job: Job, done: Done) -> tuple[Any, dict[str, Any], int] | None:
        """A build job's (batch, state, records), or None when all were skipped."""
        took = done.fetch_seconds + done.collate_seconds
        if took > self.slowest[0] and self.finished:  # not the first: see slowest
            self.slowest = (took, job)
        self.finished += 1
        if done.skipped:
            self.count(done)
        else:  # the usual case, once a batch: the sums written out
            self.fetch_seconds += done.fetch_seconds
            self.collate_seconds += done.collate_seconds
            self.transform_seconds += done.transform_seconds
            self.hits += done.hits
            if done.reads is not NO_READS:  # a source block was decoded, or read remotely
                self.reads += done.reads
            if done.work_seconds:  # a worker's job (inline jobs report no worker time)
                self.work_seconds += done.work_seconds
                self.cpu_seconds += done.cpu_seconds
                self.system_seconds += done.system_seconds
                self.faults += done.faults
                self.cpu_wait_seconds += done.cpu_wait_seconds
                self.transfer_seconds += done.transfer_seconds
                self.nbytes += done.nbytes
        if done.value is EMPTY:
            return None
        return done.value, job.state or {}, job.count - len(done.skipped)


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, sent once per worker (pickled with cloudpickle)."""

    dataset: Dataset[Any] | IterDataset[Any]
    collate_fn: Callable[[list[Any]], Any] | None
    batch_size: int
    on_error: str
    seed: int
    num_workers: int
    worker_init_fn: Callable[[WorkerInfo], None] | None
    init_arg: Any
    batched: bool = True  # False: records one by one (batch_size=None)
    start: int = 0  # which start of the loader's workers (0: the first); seeds depend on it


class Runtime:
    """Runs jobs for one worker (thread or process).

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 4, "raise", 0, 1, None, None)
        >>> rt = Runtime(spec, worker_id=0, mode="thread", pool=None)
        >>> job = Job(0, "build", ((Context(), np.array([5, 6])),), "batch 0")
        >>> rt.run(job).value.tolist()
        [5, 6]
    """

    def __init__(
        self,
        spec: WorkerSpec,
        worker_id: int,
        mode: str,
        pool: BufferPool | None,
        *,
        split: bool = False,
        cpu_wait: bool = False,
    ) -> None:
        self.spec = spec
        self._inline = mode == "inline"
        self._cpu_wait = cpu_wait  # also measure the time waiting for a CPU
        self._clock: CpuWaitClock | None = None  # opened on the worker's thread
        self._kernel: KernelUsage | None = None  # counts on the thread that runs the jobs
        self._kernel_in = 0  # jobs until the kernel's counts are read again
        self.info = WorkerInfo(
            id=worker_id,
            num_workers=spec.num_workers,
            seed=worker_seed(spec.seed, spec.start, worker_id),
            mode=mode,
            dataset=spec.dataset,
            init_arg=spec.init_arg,
            loader_seed=spec.seed,
        )
        # The parent counts skipped records against max_errors, in record order.
        self.builder = BatchBuilder(
            spec.dataset if isinstance(spec.dataset, Dataset) else None,
            spec.collate_fn,
            spec.batch_size,
            pool=pool,
            on_error=spec.on_error,
            split=split,
            count_reads=False,  # read around each job instead (run())
        )
        self._streams: dict[tuple[int, int], StreamCursor[Any]] = {}
        self._batched = spec.batched
        # Inline, the CPU time of the caller's thread is measured on the first jobs,
        # then on one job in _PROBE_EVERY only when they are slow enough for it to
        # cost nothing (a thread CPU clock read is a system call): it tells waits from
        # work. The stats scale what was measured to the whole production time.
        self._probing = mode == "inline"
        self._probed: list[float] = []
        self._probe_in = 1  # jobs until the next one measured
        # How a careful job names each record before reading it (a process worker
        # tells its parent: see careful.py).
        self.announce: Callable[[int], None] = _ignore

    def start(self) -> None:
        """Mark the calling thread as this worker and run the user's ``worker_init_fn``."""
        set_worker_info(self.info)
        if self.spec.worker_init_fn is not None:
            self.spec.worker_init_fn(self.info)

    def stop(self) -> None:
        """Release what the worker's thread opened to measure its jobs (idempotent);
        the thread that ran the jobs calls it as it ends."""
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.close()

    def run(self, job: Job) -> Done:
        """Do ``job``; exceptions propagate with the sample and batch located."""
        transform, hits, reads = thread_counts()
        if self._inline:  # the caller's own time: no worker time to report
            if self._probing:
                self._probe_in -= 1
                if self._probe_in <= 0:
                    return self._run_probed(job, transform, hits, reads)
            return _counted(self._run(job), transform, hits, reads)
        clock = self._clock
        if self._cpu_wait and clock is None:
            clock = self._clock = CpuWaitClock()
        queued = clock.seconds() if clock is not None else 0.0
        kernel = self._kernel
        if kernel is None:  # the first job: count from here, not from the thread's start
            kernel = self._kernel = KernelUsage()
            kernel.since()
        start, cpu = time.perf_counter(), time.thread_time()
        done = self._run(job)
        done.work_seconds = time.perf_counter() - start
        done.cpu_seconds = time.thread_time() - cpu
        # The kernel's counts run on between reads: read after a job that took long
        # enough for the system call to cost nothing, else after one in _KERNEL_EVERY
        # (that job carries the others' counts: the sums stay whole).
        self._kernel_in -= 1
        if self._kernel_in <= 0 or done.work_seconds >= _KERNEL_WORTH:
            done.system_seconds, done.faults = kernel.since()
            self._kernel_in = _KERNEL_EVERY
        if clock is not None:
            done.cpu_wait_seconds = clock.seconds() - queued
        return _counted(done, transform, hits, reads)

    def _run_probed(self, job: Job, transform: float, hits: int, reads: SourceReads) -> Done:
        """An inline job with its wall and CPU time (``work_seconds``, ``cpu_seconds``):
        each of the first ``_PROBED`` jobs, then one in ``_PROBE_EVERY`` if those took
        ``_PROBE_WORTH`` seconds on average."""
        start, cpu = time.perf_counter(), time.thread_time()
        done = self._run(job)
        done.work_seconds = time.perf_counter() - start
        done.cpu_seconds = time.thread_time() - cpu
        probed = self._probed
        if len(probed) < _PROBED:
            probed.append(done.work_seconds)
            if len(probed) == _PROBED:
                self._probing = sum(probed) >= _PROBED * _PROBE_WORTH
        self._probe_in = 1 if len(probed) < _PROBED else _PROBE_EVERY
        return _counted(done, transform, hits, reads)

    def _run(self, job: Job) -> Done:
        counters = self.builder.counters
        fetch, collate = counters.fetch_seconds, counters.collate_seconds
        skipped = len(counters.errors)
        if job.kind == "stream":
            return self._read_stream(job)
        if job.careful is not None:  # read again after a crash: record by record
            return read_carefully(self.builder, job, self.announce)
        if job.read is not None:  # a stream read in this process: its cursor reads
            return job.read()
        if job.kind == "build":
            try:
                value = self.builder.build(job.parts, job.where, empty=EMPTY)
            except Exception as exc:
                add_batch_index(exc, job.seq)
                raise
        else:  # the records of a chunk, or of a slice of a batch
            ((ctx, indices),) = job.parts
            try:
                if job.into is not None:  # written into the batch by each thread
                    value = self.builder.stream_slice(ctx, indices, job.where, *job.into)
                else:
                    value = self.builder.records(ctx, indices, job.where)
            except Exception as exc:
                if job.batch_index is not None:
                    add_batch_index(exc, job.batch_index)
                raise
        if len(counters.errors) == skipped:  # nothing skipped (the usual case)
            return Done(value, counters.fetch_seconds - fetch, counters.collate_seconds - collate)
        return Done(
            value,
            counters.fetch_seconds - fetch,
            counters.collate_seconds - collate,
            [
                (index, summary, exc)
                for (index, summary), exc in zip(
                    counters.skipped[skipped:], counters.errors[skipped:], strict=True
                )
            ],
        )

    def _read_stream(self, job: Job) -> Done:
        """The next batch (or, unbatched, the next few records) of one stream part.

        The part's cursor stays open between jobs; a job of a new iterator (token)
        opens its parts afresh at ``open_state``.
        """
        key = (job.token, job.part)
        cursor = self._streams.get(key)
        if cursor is None:
            for old in [k for k in self._streams if k[0] != job.token]:
                del self._streams[old]
            ((ctx, _),) = job.parts
            dataset: IterDataset[Any] = self.spec.dataset  # type: ignore[assignment]
            cursor = self._streams[key] = dataset._open(ctx, job.open_state)
        start = time.perf_counter()
        records: list[Any] = []
        states: list[dict[str, Any]] = []
        try:
            for _ in range(job.count):
                records.append(next(cursor))
                if not self._batched:
                    states.append(cursor.state_dict())
        except StopIteration:
            if not self._batched:  # one state more: the part's state after it ended
                states.append(cursor.state_dict())
        except Exception as exc:
            add_location(exc, None, f"record {len(records)} of {job.where}")
            raise
        fetch = time.perf_counter() - start
        if self._batched:
            states = [cursor.state_dict()]
            value = self.builder.collate(records) if records else EMPTY
            collate = time.perf_counter() - start - fetch
            return Done(value, fetch, collate, [], states, len(records))
        return Done(records, fetch, 0.0, [], states, len(records))


def _counted(done: Done, transform: float, hits: int, reads: SourceReads) -> Done:
    """``done`` with what this thread's :func:`thread_counts` gained since they were
    ``transform``, ``hits`` and ``reads``: time in map functions, source reads."""
    transformed, hit, read = thread_counts()
    done.transform_seconds = transformed - transform
    done.hits = hit - hits
    if read is not reads:  # a source block was decoded, or read remotely
        done.reads = read - reads
    return done


_PROBED = 8  # inline jobs whose CPU time is always measured
_PROBE_WORTH = 1e-3  # the mean seconds a job takes for later ones to be measured
_PROBE_EVERY = 8  # then one job in this many is measured
_KERNEL_EVERY = 8  # worker jobs: the kernel's counts read after one job in this many
_KERNEL_WORTH = 1e-3  # and after every job that took this many seconds


def _ignore(_: int) -> None:
    """What a job's records are named to where no one listens (threads, inline)."""
