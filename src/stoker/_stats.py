"""``LoaderStats``: where an iterator's time went, and what limits it.

The counters come from the stages that already run (the batch builder, the workers,
the job window); the report (``str(stats)``) and the verdict (``stats.verdict``,
see ``_verdict.py``) are pure functions of them.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._report import report
from ._source_caches import CacheCounts, CacheLayout, SourceCache, merge_caches
from ._tally import remote_tally, this_thread_tally
from ._verdict import Verdict, diagnose

__all__ = [
    "NO_READS",
    "LoaderStats",
    "SourceReads",
    "SourceShare",
    "add_reads",
    "add_transform_time",
    "available_cores",
    "count_read",
    "source_reads",
    "transform_time",
]


class _Clock(threading.local):
    seconds = 0.0  # each thread starts at 0 (a class default: no getattr on the hot path)
    hits = 0
    misses = 0
    decoded_bytes = 0
    redecoded_bytes = 0
    by_source: dict[CacheLayout, list[int]] | None = None  # a source's decodes (made on first)
    caches: tuple[CacheCounts, ...] = ()  # by_source as SourceReads.caches, made on a change
    # The counts above as a SourceReads, made when first read after they changed:
    # read twice around every batch, they rarely change (in-memory data never).
    reads: SourceReads | None = None


_clock = _Clock()


class SourceReads(NamedTuple):
    """What a source's decode cache did: blocks found decoded (``hits``), blocks
    decoded (``misses``), the bytes decoded, and the part of them decoded again after
    the cache had let the same block go (a cache too small for the order read); and
    what its remote reads did (see :class:`~stoker._tally.RemoteTally`); ``caches``:
    the decodes again by source (see :mod:`stoker._source_caches`).

    Read around every batch, so it is a tuple (cheap to make), and sums or
    differences with nothing read (the usual case of in-memory data) make no new one.

    Example:
        >>> (SourceReads(3, 1, 100, 0) - SourceReads(1, 1, 100, 0)).hits
        2
    """

    hits: int = 0
    misses: int = 0
    decoded_bytes: int = 0
    redecoded_bytes: int = 0
    requests: int = 0
    retries: int = 0
    truncated: int = 0
    remote_bytes: int = 0
    backoff_seconds: float = 0.0
    caches: tuple[CacheCounts, ...] = ()

    def __add__(self, other: object) -> SourceReads:
        if not isinstance(other, SourceReads):
            return NotImplemented
        if other is NO_READS or other == NO_READS:
            return self
        if self is NO_READS or self == NO_READS:
            return other
        return _combine(self, other, 1)

    def __sub__(self, other: SourceReads) -> SourceReads:
        if self is other or self == other:
            return NO_READS
        return _combine(self, other, -1)


def _combine(a: SourceReads, b: SourceReads, sign: int) -> SourceReads:
    # The same caches tuple when no block was decoded in between (the usual case).
    same = a.caches is b.caches and sign < 0
    return SourceReads(
        a.hits + sign * b.hits,
        a.misses + sign * b.misses,
        a.decoded_bytes + sign * b.decoded_bytes,
        a.redecoded_bytes + sign * b.redecoded_bytes,
        a.requests + sign * b.requests,
        a.retries + sign * b.retries,
        a.truncated + sign * b.truncated,
        a.remote_bytes + sign * b.remote_bytes,
        a.backoff_seconds + sign * b.backoff_seconds,
        () if same else merge_caches(a.caches, b.caches, sign),
    )


NO_READS = SourceReads()
"""Nothing read: what a job that read no source block reports (compare with ``is``)."""


def count_read(
    hits: int = 0,
    decoded_bytes: int | None = None,
    again: bool = False,
    source: CacheLayout | None = None,
) -> None:
    """Count, on this thread, ``hits`` blocks served decoded, or one block decoded
    (``decoded_bytes`` of it; ``again``: it had been decoded and let go before), by
    the decode cache of ``source`` when one is named.
    The batch builder and the workers read the sums around a fetch (:func:`source_reads`)."""
    clock = _clock
    clock.reads = None
    clock.hits += hits
    if decoded_bytes is not None:
        clock.misses += 1
        clock.decoded_bytes += decoded_bytes
        if again:
            clock.redecoded_bytes += decoded_bytes
        if source is not None:
            _count_source(clock, ((source, 1, decoded_bytes, decoded_bytes if again else 0),))


def _count_source(clock: _Clock, caches: tuple[CacheCounts, ...]) -> None:
    by_source = clock.by_source
    if by_source is None:
        by_source = clock.by_source = {}
    for layout, m, d, r in caches:
        counts = by_source.setdefault(layout, [0, 0, 0])
        counts[0] += m
        counts[1] += d
        counts[2] += r
    clock.caches = tuple((layout, m, d, r) for layout, (m, d, r) in by_source.items())


def add_reads(reads: SourceReads) -> None:
    """Add ``reads`` counted on another thread (a part of a split gather) to this one's."""
    clock = _clock
    clock.reads = None
    clock.hits += reads.hits
    clock.misses += reads.misses
    clock.decoded_bytes += reads.decoded_bytes
    clock.redecoded_bytes += reads.redecoded_bytes
    if reads.caches:
        _count_source(clock, reads.caches)
    if reads.requests:
        remote_tally().add(
            reads.requests, reads.retries, reads.truncated, reads.remote_bytes,
            reads.backoff_seconds,
        )  # fmt: skip


def source_reads() -> SourceReads:
    """This thread's :func:`count_read` and :func:`remote_tally` sums so far."""
    c = _clock
    r = this_thread_tally()
    if r is None:
        reads = c.reads
        if reads is None:
            reads = c.reads = SourceReads(
                c.hits, c.misses, c.decoded_bytes, c.redecoded_bytes, caches=c.caches
            )
        return reads
    counts = r.counts()
    return SourceReads(c.hits, c.misses, c.decoded_bytes, c.redecoded_bytes, *counts, c.caches)


def add_transform_time(seconds: float) -> None:
    """Add ``seconds`` spent in map functions to this thread's total (see
    :func:`transform_time`); the batch builder and the workers read it around a fetch."""
    _clock.seconds += seconds


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def transform_time() -> float:
    """The time this thread has spent in map functions so far."""
    return _clock.seconds


@dataclass(frozen=True)
class SourceShare:
    """One source of a mixture (``sk.mix``) in ``it.stats().mixture``.

    Attributes:
        name: the source's name (its position as a string for a list of sources).
        weight: the share asked for, in force at the iterator's position (normalised).
        share: the share of the records drawn so far in this epoch that came from it.
        records: the records drawn from it so far in this epoch.

    Example:
        >>> SourceShare(name="web", weight=0.7, share=0.69, records=690).records
        690
    """

    name: str
    weight: float
    share: float
    records: int


@dataclass(frozen=True)
class LoaderStats:
    """A snapshot of one iterator's counters (``it.stats()``).

    ``str(stats)`` is a short report that ends with the verdict; ``stats.as_dict()``
    is the same as JSON types. Times of work done in workers are summed over the
    workers (two workers busy for one second add up to two seconds).

    Attributes:
        batches: batches yielded so far.
        samples: records in those batches.
        wait_seconds: time the caller spent waiting in ``next()`` for a batch that was
            not ready (with production on the caller's thread: all production time).
        produce_seconds: time spent producing batches (fetch + collate).
        fetch_seconds: time spent reading records (sources and transforms).
        collate_seconds: time spent collating records into batches.
        elapsed_seconds: time since the iterator was created.
        worker_mode: the execution mode actually used: "inline", "thread",
            "process" or "ray" (``worker_mode="auto"`` resolved).
        prefetch: where batches are produced ("caller thread", "background thread,
            N in flight", "4 process workers, 8 batches in flight").
        skipped: (sample index, error summary) of records skipped under ``on_error="skip"``.
        recycled_batches: batches written into recycled buffers.
        allocated_batches: batches that needed fresh memory.
        num_workers: worker threads or processes (0 inline).
        worker_utilisation: the share of the workers' time spent on jobs (0..1).
        bottleneck: the verdict in one line.
        watchdog: what the watchdog found when ``next()`` waited ``watchdog`` seconds
            without a batch: the batches and samples in flight and the stacks of the
            workers reading them (None while it has not fired).
        transform_seconds: the part of ``fetch_seconds`` spent in map functions
            (``read_seconds`` is the rest: the source's own reads).
        transfer_seconds: handing batches from process workers to the main process:
            copying into shared memory in the worker, receiving and unpickling here.
        queue_seconds: time jobs waited for a free worker (and in transit).
        work_seconds: the workers' wall time on jobs (inline: production time).
        cpu_seconds: the workers' CPU time on jobs (0 inline).
        idle_seconds: time the loader waited for the training loop: every batch in
            flight was ready and the window was full.
        bytes_moved: bytes that crossed from process workers (pipe and shared memory).
        restarts: crashed workers replaced (``restart_workers=True``).
        depth: batches in flight (0 when batches are built on demand).
        cpu_count: cores this process may run on.
        first_batch_seconds: time from the iterator's creation to its first batch
            (workers starting, the window filling). The verdict judges the time after it.
        mixture: for a dataset built with ``sk.mix``, the realised share of each
            source so far in this epoch next to the weight asked for (None otherwise).
        workers_sized: the thread count is sized while loading (``num_workers="auto"``
            on threads); ``num_workers`` is the count now.
        inline_since: with ``worker_mode="auto"``, the batch from which batches are
            built on the caller's thread because the hand-off to workers cost more
            than the work (None while workers build them). ``num_workers`` stays the
            workers started; the counters cover both phases.
        cache_hits: blocks (row groups, decoded copies of files) that table sources
            found already decoded, summed over the workers.
        cache_misses: blocks they decoded.
        decoded_bytes: the bytes those decodes produced (the data read once each
            epoch, when the cache holds what the order needs).
        redecoded_bytes: the part of ``decoded_bytes`` decoded again after the cache
            had let the same block go: the cache thrashes when it is most of it.
        source_caches: those decodes by table source (:class:`~stoker.SourceCache`:
            its name, its blocks, its ``cache_bytes``), for the sources whose cache
            decoded a block; the verdict names the one that thrashes.
        slowest_batch_seconds: the longest a batch took to build (read and collate).
        slowest_batch: that batch and its sample indices, in words (None before one).
        remote_requests: requests that remote sources (fsspec URLs) sent, summed
            over the workers; ``remote_retries`` of them were tries again after a
            throttled (429, 503), failed, reset, timed-out or truncated one
            (``remote_truncated`` truncated bodies read again), ``remote_bytes`` the
            bytes received and ``remote_backoff_seconds`` the time waited between tries.
        isolated: with ``worker_mode="auto"``, user code not marked safe to share
            the training process (:func:`~stoker.shares_process`,
            :func:`~stoker.releases_gil`) ran in worker processes only, never on
            threads or the caller's thread.

    Example:
        >>> import json, stoker as sk
        >>> it = iter(sk.DataLoader(sk.range(0, 8), batch_size=4))
        >>> _ = next(it)
        >>> stats = it.stats()
        >>> stats.batches, stats.samples
        (1, 4)
        >>> str(stats).splitlines()[0]  # doctest: +ELLIPSIS
        'stoker: 1 batches, 4 samples in ...'
        >>> json.loads(json.dumps(stats.as_dict()))["batches"]
        1
    """

    batches: int
    samples: int
    wait_seconds: float
    produce_seconds: float
    fetch_seconds: float
    collate_seconds: float
    elapsed_seconds: float
    worker_mode: str
    prefetch: str
    skipped: list[tuple[int, str]] = field(default_factory=list)
    recycled_batches: int = 0
    allocated_batches: int = 0
    num_workers: int = 0
    worker_utilisation: float = 0.0
    bottleneck: str = ""
    watchdog: str | None = None
    transform_seconds: float = 0.0
    transfer_seconds: float = 0.0
    queue_seconds: float = 0.0
    work_seconds: float = 0.0
    cpu_seconds: float = 0.0
    idle_seconds: float = 0.0
    bytes_moved: int = 0
    restarts: int = 0
    depth: int = 0
    cpu_count: int = 1
    first_batch_seconds: float = 0.0
    mixture: list[SourceShare] | None = None
    workers_sized: bool = False
    inline_since: int | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    decoded_bytes: int = 0
    redecoded_bytes: int = 0
    remote_requests: int = 0
    remote_retries: int = 0
    remote_truncated: int = 0
    remote_bytes: int = 0
    remote_backoff_seconds: float = 0.0
    isolated: bool = False
    slowest_batch_seconds: float = 0.0
    slowest_batch: str | None = None
    source_caches: list[SourceCache] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.bottleneck:
            object.__setattr__(self, "bottleneck", self.verdict.line)

    @property
    def verdict(self) -> Verdict:
        """What limits the loader, which stage dominates and what to change."""
        return diagnose(self)

    @property
    def read_seconds(self) -> float:
        """Time in the source's own reads (``fetch_seconds`` less the map functions)."""
        return max(0.0, self.fetch_seconds - self.transform_seconds)

    @property
    def cache_hit_rate(self) -> float:
        """The share of the blocks read that were found decoded (1.0 with no reads)."""
        total = self.cache_hits + self.cache_misses
        return self.cache_hits / total if total else 1.0

    @property
    def samples_per_second(self) -> float:
        """Records yielded per second since the iterator was created."""
        return self.samples / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def batches_per_second(self) -> float:
        """Batches yielded per second since the iterator was created."""
        return self.batches / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Every counter, the rates and the verdict as JSON types (``json.dumps`` works)."""
        out = dataclasses.asdict(self)
        out["skipped"] = [[index, summary] for index, summary in self.skipped]
        verdict = self.verdict
        out.update(
            read_seconds=self.read_seconds,
            cache_hit_rate=self.cache_hit_rate,
            samples_per_second=self.samples_per_second,
            batches_per_second=self.batches_per_second,
            verdict={
                "kind": verdict.kind,
                "stage": verdict.stage,
                "reason": verdict.reason,
                "advice": list(verdict.advice),
            },
        )
        return out

    def __str__(self) -> str:
        return report(self)
