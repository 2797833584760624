"""The verdict's advice about sources: a decode cache that thrashes, a store that throttles.

Pure functions of counters (what they read is :class:`SourceCounters`), called by
:func:`stoker._verdict.diagnose` when reading dominates. A cache that thrashes is
named by source (``it.stats().source_caches``): how many of its blocks its
``cache_bytes`` holds, and the fixes that apply to it, with numbers; counters without
sources (made up, or from an older process) get the fixes of every table source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from ._source_caches import SourceCache, binary_size

__all__ = ["SourceCounters", "thrash_advice", "thrashes", "throttle_advice", "throttled"]

_THRASH = 0.5  # share of the bytes decoded that were decoded before: a thrashing cache
_THROTTLED = 0.05  # share of remote requests retried above which the store is the limit
_CACHE_FIRST = 1 << 30  # a source whose blocks fit this: cache_bytes is the first fix


class SourceCounters(Protocol):
    """The counters the source advice reads: a :class:`~stoker.LoaderStats` has them."""

    @property
    def cache_misses(self) -> int: ...
    @property
    def decoded_bytes(self) -> int: ...
    @property
    def redecoded_bytes(self) -> int: ...
    @property
    def source_caches(self) -> Sequence[SourceCache]: ...
    @property
    def remote_requests(self) -> int: ...
    @property
    def remote_retries(self) -> int: ...
    @property
    def remote_backoff_seconds(self) -> float: ...


def thrashes(s: SourceCounters) -> bool:
    """A decode cache that decoded most of its bytes again (blocks let go, then read),
    over all sources or for one of them (a mixture's other sources may decode fresh)."""
    if s.cache_misses >= 4 and s.redecoded_bytes >= _THRASH * s.decoded_bytes > 0:
        return True
    return any(c.thrashes for c in s.source_caches)


def thrash_advice(s: SourceCounters, waited: str) -> tuple[str, tuple[str, ...]]:
    """The reason and the advice for a thrashing decode cache: the sources whose blocks
    were decoded again, most first, and the fixes that apply to each."""
    again = s.redecoded_bytes / max(1, s.decoded_bytes)
    head = (
        f"{waited}, mostly decoding: the decode cache thrashes ({again:.0%} of the "
        f"{s.decoded_bytes / 1e6:,.1f} MB decoded had been decoded before and let go; more "
        "workers would only decode more)"
    )
    named = sorted((c for c in s.source_caches if c.redecoded_bytes), key=_most_again)
    thrashing = [c for c in named if c.thrashes] or named[:1]
    if not thrashing:
        return head, _ANY_SOURCE
    holds = "; ".join(
        f"{c.name}: its cache_bytes ({binary_size(c.cache_bytes)}) holds {c.blocks_held:,} of its "
        f"{c.blocks:,} {c.unit} ({binary_size(c.block_bytes)} each, decoded)"
        for c in thrashing
    )
    advice = [fix for c in thrashing for fix in _fixes(c)]
    return f"{head}: {holds}", tuple(advice)


def _most_again(c: SourceCache) -> int:
    return -c.redecoded_bytes


def _fixes(c: SourceCache) -> list[str]:
    """What keeps the blocks of ``c`` decoded, the likeliest fix first."""
    whole = c.blocks * c.block_bytes
    mib = max(1, math.ceil(1.1 * whole / (1 << 20)))
    cache = (
        f"{c.name}: cache_bytes={mib} << 20 ({mib:,} MiB holds all {c.blocks:,} {c.unit} "
        "decoded, in each process that reads it)"
    )
    sampler = (
        f"{c.name}: sampler=ds.shuffle_sampler(seed) in place of shuffle=True reads a few "
        f"{c.unit} at a time (in random order, rows shuffled within a window: not a full "
        "permutation)"
    )
    fixes = [cache, sampler] if whole <= _CACHE_FIRST else [sampler, cache]
    if c.decoded_copy:
        copy = (
            f"{c.name}: cache_dir=<a local folder with room> keeps a decoded copy on disk, "
            "decoded once and memory-mapped (the default cache_dir='auto' makes one by "
            "itself only for local files of numeric columns on a disk with room)"
        )
        fixes.insert(0 if whole > _CACHE_FIRST else 1, copy)
    return fixes


_ANY_SOURCE = (
    "keep the decoded data: for Parquet, the default cache_dir='auto' writes a decoded "
    "copy once when the disk has room, or pass cache_dir=<a local folder with room>",
    "or cache_bytes= larger than the decoded columns read (every table source takes it: "
    "per process, the process's one decode cache takes the largest asked for)",
    "or read a few blocks at a time, for every table source (Parquet row groups, "
    "SQLite rowid ranges, JSONL/CSV line runs, Lance and Arrow fragments, HF and "
    "Arrow table slices): sampler=ds.shuffle_sampler(seed) (blocks in random order, "
    "shuffled within a window: not a full permutation)",
)


def throttled(s: SourceCounters) -> bool:
    """A remote store that throttled or failed many of the requests (they were retried)."""
    return s.remote_retries >= 3 and s.remote_retries >= _THROTTLED * s.remote_requests


def throttle_advice(s: SourceCounters, waited: str) -> tuple[str, tuple[str, ...]]:
    """The reason and the advice for a remote store that throttles or fails."""
    retried = s.remote_retries / max(1, s.remote_requests)
    reason = (
        f"{waited}, reading from a remote store that throttles or fails: {retried:.0%} of "
        f"{s.remote_requests:,} requests retried, {s.remote_backoff_seconds:.1f} s waited"
    )
    advice = (
        "lower concurrency= on the source: the store answers 429/503 when asked too fast, "
        "and more workers would only add requests",
        "or keep the data nearer (a local copy, from_parquet's cache_dir=), or ask the "
        "store for a higher request rate; a larger retry= budget only if reads fail",
    )
    return reason, advice
