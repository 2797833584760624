"""``LoaderStats``: where an iterator's time went, and what limits it.

The counters come from the stages that already run (the batch builder, the workers,
the job window; what sources read is counted per thread in ``_reads.py``, whose
names are re-exported here); the report (``str(stats)``) and the verdict
(``stats.verdict``, see ``_verdict.py``) are pure functions of them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from ._reads import (
    NO_READS,
    SourceReads,
    add_reads,
    add_transform_time,
    count_read,
    source_reads,
    transform_time,
)
from ._source_caches import SourceCache, binary_size
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


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
        cpu_seconds: the workers' CPU time on jobs (inline: the caller's thread's,
            measured on the first batches and on every batch of a millisecond or
            more, and scaled to the production time).
        system_seconds: the part of ``cpu_seconds`` spent in the kernel (Linux;
            counted from each worker thread's previous job, so waits between jobs
            add their little).
        page_faults: minor page faults the workers' jobs took: pages of fresh memory
            the kernel handed them (Linux). Many, with much system time, mean memory
            freed and taken back every record (see ``tune_allocator``).
        allocator_tuned: this process's glibc thresholds keep large freed blocks for
            reuse (``DataLoader(tune_allocator=True)``; worker processes always do).
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
        slowest_batch_seconds: the longest a batch after the first took to build
            (read and collate); the first one's time, which includes opening the
            sources, is in ``first_batch_seconds``.
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
    system_seconds: float = 0.0
    page_faults: int = 0
    allocator_tuned: bool = False
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


def _kernel_words(s: LoaderStats) -> str:
    """The kernel's part of the workers' CPU time and their page faults a batch."""
    if not s.cpu_seconds or not s.batches:
        return ""
    return (
        f" (kernel {min(s.system_seconds, s.cpu_seconds) / s.cpu_seconds:.0%}, "
        f"{s.page_faults / s.batches:,.0f} page faults a batch)"
    )


def report(s: LoaderStats) -> str:
    """The multi-line report of ``str(stats)`` (every line is explained in docs/stats.md)."""
    elapsed = s.elapsed_seconds
    verdict = s.verdict
    if s.num_workers:
        where = f"{s.num_workers} {s.worker_mode} workers"
        if s.depth:
            where += f", {s.depth} batches in flight"
        where += (
            f"; busy {s.worker_utilisation:.0%}"
            + (f", CPU {s.cpu_seconds / s.work_seconds:.0%} of it" if s.work_seconds else "")
            + _kernel_words(s)
            + f"; restarts {s.restarts}"
        )
    else:
        where = f"none (built on the {s.prefetch})"
    if s.inline_since is not None:
        where = (
            f"none since batch {s.inline_since:,}, built on the caller's thread "
            f"(worker_mode='auto'); {s.num_workers} {s.worker_mode} workers before"
        )
    handoff = f"{_secs(s.transfer_seconds)}" + (
        f" · queued {_secs(s.queue_seconds)}" if s.num_workers else ""
    )
    skipped = f"{len(s.skipped)} records" + (
        f" (first: sample {s.skipped[0][0]}, {s.skipped[0][1][:60]})" if s.skipped else ""
    )
    watchdog = "quiet" if s.watchdog is None else s.watchdog.splitlines()[0][:70] + " ..."
    lines = [
        f"stoker: {s.batches:,} batches, {s.samples:,} samples in {_secs(elapsed)} "
        f"({_rate(s.samples_per_second)} samples/s, {_rate(s.batches_per_second)} batches/s)",
        f"  workers    {where}",
        f"  waiting    first batch after {_secs(s.first_batch_seconds)} · "
        f"loop waited for data {_secs(s.wait_seconds)} "
        f"({_share(s.wait_seconds, elapsed)}) · loader waited for the loop "
        f"{_secs(s.idle_seconds)} ({_share(s.idle_seconds, elapsed)})",
        f"  stages     read {_secs(s.read_seconds)} · transforms {_secs(s.transform_seconds)}"
        f" · collate {_secs(s.collate_seconds)} · hand-off {handoff}",
        f"  moved      {_bytes(s.bytes_moved)} from workers · buffers "
        f"{s.recycled_batches:,} recycled, {s.allocated_batches:,} new",
        f"  problems   skipped {skipped} · watchdog {watchdog}",
        *_mixture_lines(s.mixture),
        *_cache_lines(s),
        *_remote_lines(s),
        f"  verdict    {verdict.kind}"
        + (f" ({verdict.stage})" if verdict.stage else "")
        + f": {verdict.reason}",
    ]
    lines += [f"  advice     {a}" for a in verdict.advice] or ["  advice     -"]
    return "\n".join(lines)


def _mixture_lines(mixture: list[SourceShare] | None) -> list[str]:
    if not mixture:
        return []
    shares = " · ".join(f"{m.name} {m.share:.0%} (asked {m.weight:.0%})" for m in mixture)
    return [f"  mixture    {shares}"]


def _cache_lines(s: LoaderStats) -> list[str]:
    if not s.cache_hits and not s.cache_misses:
        return []
    again = f" ({_bytes(s.redecoded_bytes)} of it again)" if s.redecoded_bytes else ""
    return [
        f"  cache      hits {s.cache_hit_rate:.0%} ({s.cache_hits:,} of "
        f"{s.cache_hits + s.cache_misses:,} blocks, {s.cache_misses:,} misses) · decoded "
        f"{_bytes(s.decoded_bytes)}{again}",
        *(
            f"             {c.name}: {c.blocks_decoded:,} decodes of its {c.blocks:,} "
            f"{c.unit} ({_bytes(c.redecoded_bytes)} again); its cache_bytes "
            f"({binary_size(c.cache_bytes)}) holds {c.blocks_held:,}"
            for c in s.source_caches
            if c.redecoded_bytes
        ),
    ]


def _remote_lines(s: LoaderStats) -> list[str]:
    if not s.remote_requests:
        return []
    truncated = f", {s.remote_truncated:,} truncated" if s.remote_truncated else ""
    return [
        f"  remote     {s.remote_requests:,} requests · retried {s.remote_retries:,} "
        f"({_share(s.remote_retries, s.remote_requests)}{truncated}; waited "
        f"{_secs(s.remote_backoff_seconds)}) · received {_bytes(s.remote_bytes)}"
    ]


def _secs(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def _rate(per_second: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if per_second >= size:
            return f"{per_second / size:.1f} {unit}"
    return f"{per_second:.1f}"


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
