"""``LoaderStats``: where an iterator's time went, and what limits it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LoaderStats", "bottleneck_verdict"]


@dataclass(frozen=True)
class LoaderStats:
    """A snapshot of one iterator's counters (``it.stats()``).

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
        worker_utilisation: the share of the workers' time spent loading (0..1).
        bottleneck: a one-line verdict.
        watchdog: what the watchdog found when ``next()`` waited ``watchdog`` seconds
            without a batch: the batches and samples in flight and the stacks of the
            workers reading them (None while it has not fired).

    Example:
        >>> import stoker as sk
        >>> it = iter(sk.DataLoader(sk.range(0, 8), batch_size=4))
        >>> _ = next(it)
        >>> it.stats().batches
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


def bottleneck_verdict(
    *, wait: float, elapsed: float, fetch: float, collate: float, batches: int
) -> str:
    """One line saying whether the loader or the training step limits the speed."""
    if batches == 0 or elapsed <= 0:
        return "no batches yet"
    share = wait / elapsed
    stage = "reading records (the dataset and its maps)" if fetch >= collate else "collating"
    if share > 0.2:
        return (
            f"input-bound: the loop waited for data {share:.0%} of the time, mostly {stage}; "
            "more workers or a cheaper per-record function would help"
        )
    return f"compute-bound: batches were ready; the loop waited for data {share:.0%} of the time"
