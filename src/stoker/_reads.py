"""The counts a source's reads leave on the thread that reads: ``SourceReads``.

A table source counts every block it finds decoded or decodes (:func:`count_read`,
by the source's decode cache when it names it), a remote source its requests (its
thread's :func:`~stoker._tally.remote_tally`), a map its time (:func:`add_transform_time`).
The batch builder and the workers read the sums around every fetch
(:func:`source_reads`, :func:`transform_time`) and hand the differences to the parent
with the job's result; the stats sum them.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from ._source_caches import CacheCounts, CacheLayout, merge_caches
from ._tally import TALLIES, remote_tally

__all__ = [
    "thread_counts",
    "NO_READS",
    "SourceReads",
    "add_reads",
    "add_transform_time",
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
    # The counts above but the hits as a SourceReads, made when first read after they
    # changed: read twice around every batch, they rarely change (in-memory data never,
    # a table source read from its cache only when it decodes a block; its hits, which
    # change every batch, are read as a number, see thread_counts).
    rest: SourceReads | None = None


_clock = _Clock()


class SourceReads(NamedTuple):
    """What a source's decode cache did: blocks found decoded (``hits``), blocks
    decoded (``misses``), the bytes decoded, and the part of them decoded again after
    the cache had let the same block go (a cache too small for the order read); and
    what its remote reads did (see :class:`~stoker._tally.RemoteTally`); ``caches``:
    the blocks decoded, and decoded again, by source (see :mod:`stoker._source_caches`).

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
    clock.hits += hits
    if decoded_bytes is not None:
        clock.rest = None
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
    clock.rest = None
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
    _, hits, rest = thread_counts()
    return rest._replace(hits=hits) if hits else rest


def thread_counts() -> tuple[float, int, SourceReads]:
    """:func:`transform_time`, the blocks found decoded and the rest of
    :func:`source_reads` (its ``hits`` left at 0) in one call: read around every job,
    the rest made only when it changed (see ``_Clock.rest``)."""
    c = _clock
    rest = c.rest
    tally = TALLIES.tally
    if tally is not None:
        counts = tally.counts()
        rest = SourceReads(0, c.misses, c.decoded_bytes, c.redecoded_bytes, *counts, c.caches)
    elif rest is None:
        rest = c.rest = SourceReads(
            0, c.misses, c.decoded_bytes, c.redecoded_bytes, caches=c.caches
        )
    return c.seconds, c.hits, rest


def add_transform_time(seconds: float) -> None:
    """Add ``seconds`` spent in map functions to this thread's total (see
    :func:`transform_time`); the batch builder and the workers read it around a fetch."""
    _clock.seconds += seconds


def transform_time() -> float:
    """The time this thread has spent in map functions so far."""
    return _clock.seconds
