"""The text of ``str(it.stats())``: one line a stage, then the verdict and its advice.

Every line is explained in docs/stats.md; the numbers are a
:class:`~stoker.LoaderStats`'s, formatted here (and nowhere else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._source_caches import binary_size

if TYPE_CHECKING:
    from ._stats import LoaderStats, SourceShare

__all__ = ["report"]


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
