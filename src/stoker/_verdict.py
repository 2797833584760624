"""The verdict of ``it.stats()``: what limits a loader, which stage, and what to change.

A pure function of the counters in a :class:`~stoker.LoaderStats` (what it reads is
:class:`Counters`; this module imports nothing of the stats), so that it can be
checked on made-up numbers as well as on real loaders. The rules, in order:

* **compute-bound** when the training loop waited for data at most 20 % of the time
  (after its first batch: starting workers and filling the window happen once);
* **input-bound** otherwise, and then, when reading dominates and a table source's
  decode cache decoded most of its bytes again after letting the same blocks go
  (the cache thrashes), the sources whose blocks were decoded again and what keeps
  each one's blocks decoded (``_source_advice.py``; more workers would only decode
  more); when reading dominates and a remote store answered many
  requests with throttling or failures (retried: 5 % of the requests or more), the
  store is the limit (more workers would only add to the storm); else:

  0. one batch that took half the wait or more, ten times the others' average: a
     stalled record, named with its batch and sample indices;

  1. busy thread workers (70 % or more) in a process whose allocator gives large
     freed blocks back (no ``tune_allocator``) that spent a quarter of their CPU
     time or more in the kernel, at 256 page faults a batch or more (a MiB of fresh
     pages): the memory each record frees is taken back fresh by the next, so
     ``tune_allocator=True`` or processes, not more threads (checked before the
     GIL: threads that take faults use less than their cores, as GIL-bound ones do);
  1b. thread workers that used about one core between them and waited the rest of
     their time: the GIL runs them one at a time (processes would run side by
     side; more threads would only wait longer);
  2. workers that delivered no faster than the same work would run inline (the work
     measured in the workers plus the loop's own time): the hand-off costs more than
     the work, so fewer workers, ``num_workers=0`` or bigger batches (and, for code
     that ``auto`` isolates in processes, the mark that lets it go inline);
  3. busy workers (utilisation of 70 % or more): more workers while cores are free,
     else a cheaper version of the dominant stage; jobs that mostly wait (CPU under
     half their time: I/O, sleeps) are called waiting, not decoding, and for code
     that ``auto`` isolates in processes the advice names the mark for threads;
  4. idle workers while the loop waited: a window too small for the workers (a bigger
     ``prefetch``), or the main process receiving batches;
  5. no workers: workers, when a batch costs enough to pay for a hand-off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ._source_advice import SourceCounters, thrash_advice, thrashes, throttle_advice, throttled

__all__ = ["INPUT_BOUND_SHARE", "Counters", "Verdict", "diagnose"]

INPUT_BOUND_SHARE = 0.2
"""The share of the time the loop waited for data above which the input limits it."""

_BUSY = 0.7  # worker utilisation above which the workers are the limit
_KERNEL_SHARE = 0.25  # system time / CPU time of thread workers' jobs: memory churn,
_FAULTS_A_BATCH = 256  # with at least this many page faults a batch (1 MiB of pages)
_CPU_WORK = 0.5  # CPU time / wall time of jobs above which they are CPU work
_NOT_FASTER = 0.9  # delivered in at least this share of the inline estimate: no gain
_WORTH_A_HANDOFF = 200e-6  # seconds of work per batch below which workers cannot pay
_STALL_SHARE = 0.5  # one batch that took this share of the wait or more, and
_STALL_RATIO = 10.0  # this many times the others' average, is a stall

Kind = Literal["input-bound", "compute-bound", "unknown"]


class Counters(SourceCounters, Protocol):
    """The counters the verdict reads: a :class:`~stoker.LoaderStats` has them all."""

    @property
    def batches(self) -> int: ...
    @property
    def wait_seconds(self) -> float: ...
    @property
    def fetch_seconds(self) -> float: ...
    @property
    def transform_seconds(self) -> float: ...
    @property
    def collate_seconds(self) -> float: ...
    @property
    def transfer_seconds(self) -> float: ...
    @property
    def elapsed_seconds(self) -> float: ...
    @property
    def first_batch_seconds(self) -> float: ...
    @property
    def work_seconds(self) -> float: ...
    @property
    def cpu_seconds(self) -> float: ...
    @property
    def system_seconds(self) -> float: ...
    @property
    def page_faults(self) -> int: ...
    @property
    def allocator_tuned(self) -> bool: ...
    @property
    def worker_mode(self) -> str: ...
    @property
    def num_workers(self) -> int: ...
    @property
    def worker_utilisation(self) -> float: ...
    @property
    def depth(self) -> int: ...
    @property
    def cpu_count(self) -> int: ...
    @property
    def workers_sized(self) -> bool: ...
    @property
    def inline_since(self) -> int | None: ...
    @property
    def isolated(self) -> bool: ...
    @property
    def slowest_batch_seconds(self) -> float: ...
    @property
    def slowest_batch(self) -> str | None: ...


@dataclass(frozen=True)
class Verdict:
    """What limits a loader: ``kind``, the dominant ``stage`` and the ``advice``.

    ``kind`` is "input-bound" (the loop waits for data), "compute-bound" (batches
    were ready) or "unknown" (no batch yet). ``stage`` is "read", "transforms",
    "collate", "hand-off" or "training step". ``line`` is the one-line summary
    (``stats.bottleneck``).

    Example:
        >>> import stoker as sk
        >>> stats = sk.LoaderStats(batches=100, samples=3200, wait_seconds=0.1,
        ...     produce_seconds=0.2, fetch_seconds=0.15, collate_seconds=0.05,
        ...     elapsed_seconds=2.0, worker_mode="inline", prefetch="caller thread")
        >>> stats.verdict.kind, stats.verdict.stage
        ('compute-bound', 'training step')
    """

    kind: Kind
    stage: str
    reason: str
    advice: tuple[str, ...]

    @property
    def line(self) -> str:
        """The verdict in one line."""
        if self.kind == "unknown":
            return self.reason
        head = f"{self.kind}: {self.reason}"
        return f"{head}; {self.advice[0]}" if self.advice else head


def diagnose(s: Counters) -> Verdict:
    """The verdict for the counters in ``s`` (see the module docstring for the rules)."""
    if s.batches == 0 or s.elapsed_seconds <= 0:
        return Verdict("unknown", "", "no batches yet", ())
    elapsed, wait = s.elapsed_seconds, s.wait_seconds
    if s.batches > 1 and 0 < s.first_batch_seconds < elapsed:
        # Starting workers and filling the window happen once: judge the steady state.
        elapsed -= s.first_batch_seconds
        wait = max(0.0, wait - s.first_batch_seconds)
    share = wait / elapsed
    stage = dominant_stage(s)
    if s.inline_since is not None:
        return _went_inline(s, share, s.inline_since)
    if share <= INPUT_BOUND_SHARE:
        return _compute_bound(s, share)
    waited = f"the loop waited for data {share:.0%} of the time"
    if stage == "read" and thrashes(s):
        return Verdict("input-bound", "read", *thrash_advice(s, waited))
    if stage == "read" and throttled(s):
        return Verdict("input-bound", "read", *throttle_advice(s, waited))
    stall = _stall(s, waited, stage, wait)
    if stall is not None:
        return stall
    if s.num_workers == 0:
        return _inline(s, waited, stage)
    return _with_workers(s, waited, stage, elapsed, wait)


def _stall(s: Counters, waited: str, stage: str, wait: float) -> Verdict | None:
    """One batch took most of the wait, many times what the others took: a record
    stalled (a hung read, a slow request, a pathological input), not a slow pipeline."""
    slowest, named = s.slowest_batch_seconds, s.slowest_batch
    if named is None or s.batches < 3 or slowest < _STALL_SHARE * wait:
        return None
    others = (s.fetch_seconds + s.collate_seconds - slowest) / (s.batches - 1)
    if slowest < _STALL_RATIO * max(others, 1e-6):
        return None
    reason = (
        f"{waited}, most of it for one batch: {named} took {_ms(slowest)}, "
        f"{slowest / max(others, 1e-6):.0f}x the {_ms(others)} of the others"
    )
    advice = (
        "look at the records of that batch (one of them stalled: a hung read, a slow "
        "request, an input the code handles badly); the watchdog= warning names the "
        "batch and shows the stuck frame while it happens",
    )
    return Verdict("input-bound", stage, reason, advice)


def dominant_stage(s: Counters) -> str:
    """The stage that took the most time, on the loop's clock (worker time is shared
    by the workers; the hand-off counts whole, as the main process does its part)."""
    share = max(1, s.num_workers)
    stages = {
        "read": max(0.0, s.fetch_seconds - s.transform_seconds) / share,
        "transforms": s.transform_seconds / share,
        "collate": s.collate_seconds / share,
        "hand-off": s.transfer_seconds,
    }
    return max(stages, key=lambda k: stages[k])


def _cpu_work(s: Counters) -> bool:
    """The workers' jobs were CPU work (not waiting for I/O)."""
    return s.work_seconds > 0 and s.cpu_seconds >= _CPU_WORK * s.work_seconds


def _compute_bound(s: Counters, share: float) -> Verdict:
    reason = f"batches were ready; the loop waited for data {share:.0%} of the time"
    advice: list[str] = []
    if s.num_workers > 1 and s.worker_utilisation < 0.3 and not s.workers_sized:
        advice.append(
            f"the workers were busy {s.worker_utilisation:.0%} of the time: fewer workers "
            "would free cores and memory"
        )
    elif s.num_workers and share > 0.05 and s.worker_utilisation < _BUSY:
        advice.append("a bigger prefetch would hide the remaining waits")
    else:
        advice.append("nothing to change in the loader")
    return Verdict("compute-bound", "training step", reason, tuple(advice))


def _went_inline(s: Counters, share: float, since: int) -> Verdict:
    """``worker_mode="auto"`` found the hand-off dearer than the work and builds the
    batches on the loop's thread: the loader already did what the advice would say."""
    per_batch = (s.fetch_seconds + s.collate_seconds) / s.batches
    reason = (
        f"worker_mode='auto' builds the batches on the loop's thread since batch {since} "
        f"(handing them to workers cost more than building them, {_ms(per_batch)} a batch)"
    )
    kind: Kind = "compute-bound" if share <= INPUT_BOUND_SHARE else "input-bound"
    if kind == "compute-bound":
        advice = "nothing to change in the loader"
    else:
        advice = (
            f"nothing to change in the workers: num_workers=0 skips the first {since} "
            "hand-offs; bigger batches cut the per-batch cost"
        )
    return Verdict(kind, "hand-off", reason, (advice,))


def _inline(s: Counters, waited: str, stage: str) -> Verdict:
    per_batch = (s.fetch_seconds + s.collate_seconds) / s.batches
    computing = s.cpu_seconds <= 0 or _cpu_work(s)
    words = _stage_words(stage, computing)
    reason = f"{waited}, mostly {words} ({_ms(per_batch)} a batch, no workers)"
    if per_batch < _WORTH_A_HANDOFF:
        return Verdict(
            "input-bound",
            stage,
            reason,
            (
                "a batch costs too little for workers to pay for their hand-off: keep "
                "num_workers=0; bigger batches cut the per-batch cost",
            ),
        )
    cores = max(2, s.cpu_count - 1)
    if not computing:  # the caller's thread mostly waited: workers overlap the waits
        more = f"more workers: num_workers={2 * cores}"
        return Verdict("input-bound", stage, reason, (more, _cheaper(stage, False)))
    if stage == "read":
        advice = f"more workers: num_workers={cores} (threads suit reads that wait for I/O)"
    else:
        advice = (
            f"more workers: num_workers={cores} (worker_mode='process' for Python work, "
            "'thread' for NumPy or decoders that release the GIL)"
        )
    return Verdict("input-bound", stage, reason, (advice, _cheaper(stage)))


def _with_workers(s: Counters, waited: str, stage: str, elapsed: float, wait: float) -> Verdict:
    n, util = s.num_workers, s.worker_utilisation
    consumer = max(0.0, elapsed - wait)
    build = s.fetch_seconds + s.collate_seconds
    cpu_work = _cpu_work(s)
    inline_work = min(build, s.cpu_seconds) if cpu_work else build
    words = _stage_words(stage, cpu_work or s.cpu_seconds <= 0)
    # 1. threads taking back, page by page, the memory they freed
    if util >= _BUSY and _churns_memory(s):
        return _memory_churn(s, waited, stage, util)
    # 1b. threads serialised by the GIL: between them they used about one core, and
    # waited the rest of their time (each one's CPU share falls as threads are added,
    # so the share alone does not tell)
    if (
        s.worker_mode == "thread"
        and n > 1
        and s.cpu_seconds > 0
        and 0.6 * elapsed <= s.cpu_seconds <= 1.2 * elapsed
        and s.work_seconds >= 1.2 * s.cpu_seconds
    ):
        reason = (
            f"{waited}; {n} thread workers used {s.cpu_seconds / elapsed:.1f} "
            f"cores between them: the GIL runs them one at a time (mostly "
            f"{_stage_words(stage)})"
        )
        return Verdict(
            "input-bound",
            stage,
            reason,
            (
                "worker_mode='process' (Python work runs in parallel in processes; "
                "more threads would only wait longer for the GIL)",
                _cheaper(stage),
            ),
        )
    # 2. the workers deliver no faster than the work would run inline
    if elapsed >= _NOT_FASTER * (inline_work + consumer):
        per_batch = inline_work / s.batches
        delivered = elapsed / s.batches
        reason = (
            f"{waited}; the hand-off costs more than the work: {_ms(per_batch)} of work a "
            f"batch, delivered every {_ms(delivered)} by {n} {s.worker_mode} workers"
        )
        handoff: tuple[str, ...] = (
            "use fewer workers: num_workers=0 (inline) would be at least as fast, or "
            "make each job bigger (bigger batches) so the work outweighs the hand-off",
        )
        if s.isolated:  # "auto" would build these inline if the code were marked
            handoff = (_MARK_SHARES, *handoff)
        return Verdict("input-bound", "hand-off", reason, handoff)
    # 3. the workers are the limit
    if util >= _BUSY:
        reason = f"{waited}; the {n} workers were busy {util:.0%} of the time, mostly {words}"
        advice: tuple[str, ...]
        if s.isolated and not cpu_work and s.cpu_seconds > 0:
            # Processes for isolation, yet the jobs mostly waited: threads would
            # overlap the waits as well, start at once and hand batches over free.
            advice = (_MARK_RELEASES, f"more workers: num_workers={2 * n}")
        elif cpu_work and n >= s.cpu_count:
            advice = (
                f"every core is in use ({s.cpu_count} cores, {n} workers): "
                f"{_cheaper(stage, cpu_work)}",
            )
        elif s.workers_sized:
            advice = (
                f"num_workers='auto' sizes the threads as it loads (now {n}) and adds "
                "more while they help",
                _cheaper(stage, cpu_work),
            )
        else:
            more = n * 2 if not cpu_work else min(s.cpu_count, n * 2)
            advice = (f"more workers would help: num_workers={more}", _cheaper(stage, cpu_work))
        return Verdict("input-bound", stage, reason, advice)
    # 4. idle workers while the loop waited
    reason = (
        f"{waited}, yet the {n} workers were busy only {util:.0%} of the time; "
        f"most time went to {words}"
    )
    if s.depth and s.depth <= n:
        advice_w = (
            f"a bigger prefetch: prefetch={2 * n} keeps every worker fed "
            f"(now {s.depth} batches in flight)"
        )
    elif stage == "hand-off":
        advice_w = (
            "the main process spends its time receiving batches: bigger batches, or "
            "worker_mode='thread' when the work releases the GIL"
        )
    else:
        advice_w = f"a bigger prefetch (now {s.depth} batches in flight) or ordered=False"
    return Verdict("input-bound", stage, reason, (advice_w,))


def _churns_memory(s: Counters) -> bool:
    """Thread workers whose jobs spent much of their CPU time in the kernel taking
    page faults: memory freed by one record and given back, taken fresh by the next."""
    return (
        s.worker_mode == "thread"
        and not s.allocator_tuned
        and s.cpu_seconds > 0
        and s.system_seconds >= _KERNEL_SHARE * s.cpu_seconds
        and s.page_faults >= _FAULTS_A_BATCH * s.batches
    )


def _memory_churn(s: Counters, waited: str, stage: str, util: float) -> Verdict:
    reason = (
        f"{waited}; the {s.num_workers} thread workers were busy {util:.0%} of the time "
        f"and spent {s.system_seconds / s.cpu_seconds:.0%} of their CPU time in the kernel, "
        f"on {s.page_faults / s.batches:,.0f} page faults a batch: glibc gives the large "
        "blocks the pipeline frees back to the system, and every record takes them back "
        "as fresh pages"
    )
    advice = (
        "DataLoader(tune_allocator=True) keeps large freed blocks for reuse (it raises "
        "glibc's malloc thresholds for the rest of this process: up to 256 MiB of freed "
        "memory stays with it), or worker_mode='process' (worker processes keep them "
        "raised); more threads would take more faults",
        _cheaper(stage),
    )
    return Verdict("input-bound", stage, reason, advice)


_MARK_SHARES = (
    "worker_mode='auto' runs this code in processes because it is not marked safe to "
    "share the training process; if it cannot crash it, mark its functions with "
    "@sk.shares_process and auto builds these batches on the loop's thread"
)
_MARK_RELEASES = (
    "threads would wait as well as these processes, start at once and hand batches "
    "over without copies: if the functions cannot crash the training process and "
    "release the GIL while they wait, mark them with @sk.releases_gil (auto then "
    "runs them on threads)"
)


def _stage_words(stage: str, computing: bool = True) -> str:
    if stage == "transforms" and not computing:
        return "the map functions, waiting (I/O, sleeps, locks) rather than computing"
    if stage == "read" and not computing:
        return "reading records from the source, waiting for I/O"
    return {
        "read": "reading records from the source",
        "transforms": "the map functions (decode, augment)",
        "collate": "collating records into batches",
        "hand-off": "handing batches to the main process",
    }.get(stage, stage)


def _cheaper(stage: str, computing: bool = True) -> str:
    if stage == "transforms" and not computing:
        return (
            "the map functions wait more than they compute: more workers overlap the "
            "waits (threads suit it: mark them with @sk.releases_gil), or make the "
            "waits shorter (local copies, batched requests)"
        )
    return {
        "read": "a faster source (local copies, bigger reads, __getitems__ for whole batches)",
        "transforms": "a cheaper decode or per-record function (smaller images, NumPy over Python)",
        "collate": "a cheaper collate (arrays of one shape collate into planned buffers)",
        "hand-off": "bigger batches (fewer, larger hand-offs)",
    }.get(stage, "a cheaper pipeline")


def _ms(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"
