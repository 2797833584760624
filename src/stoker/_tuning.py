"""The policy behind ``"auto"``: measurements in, decisions out.

``num_workers="auto"``, ``prefetch="auto"`` and ``worker_mode="auto"`` are tuned by
:class:`Tuner` from what the loader measures over windows of batches (a
:class:`Window`): how long workers spent building them, how long the consumer waited
in ``next()``, the wall time, and the size of one batch. The tuner answers with a
:class:`Decision`: run jobs on the caller's thread (inline) or on the workers, and
how many batches to keep in flight and, for ``num_workers="auto"`` on threads, how
many threads run (the rules are :mod:`stoker._sizing`'s). It decides after the first
few batches and then looks again, slowly, every few dozen; the thread count is first
decided from the first batch. It never touches which batches come out or the
state: the parent plans every batch, whoever builds it.

The rules, in words:

* **Inline or workers.** With workers, the consumer pays the time it waits in
  ``next()`` per batch; inline it would pay the time to build the batch (for a job
  shorter than a millisecond, its CPU time: the rest of its wall time on a worker
  thread is waiting for the GIL, which inline does not). When waiting for workers
  costs clearly more than building the batch oneself (tiny records, where the
  hand-off is the work), in two windows in a row, jobs run inline; a window whose
  wait is short (hand-off scale) and several times the work decides on its own.
  Inline, with batches handed out in any order (``ordered=False``), the tuner goes
  back to workers when a batch comes to cost several times what waiting for workers
  cost; in order, the iterator builds them on its own thread from then on, and so do
  the loader's later iterators.
* **Trying inline.** Those estimates come from the workers' own clocks, which threads
  fighting for the GIL inflate (a job's CPU time on a thread can be three times what
  it costs inline). So when the consumer waits for workers about as long as a batch
  takes to build, in two of three windows, the tuner tries: the next batches are
  built inline and their wall time is compared with that of the last windows on
  workers. Inline stays only when it was clearly faster; otherwise the workers take
  over again, and the next try comes only after twice as many windows as the last.
* **Batches in flight.** With workers, ``depth`` grows while the consumer still
  waits for batches, up to what the memory budget holds, and shrinks towards one
  batch per worker while batches are always ready (the consumer is the bottleneck:
  batches held ahead only cost memory). When the thread count grows, ``depth``
  grows with it to two batches per thread (within the budget): a thread without a
  job waiting for it is of no use.

This module is pure (no clocks, no threads), so every rule is tested on synthetic
numbers.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, replace

from ._sizing import ThreadSizer

__all__ = [
    "in_flight",
    "DEFAULT_MEMORY_BUDGET",
    "FIRST_DECISION",
    "MAX_AUTO_WORKERS",
    "Decision",
    "Tuner",
    "Window",
    "auto_num_workers",
]


def in_flight(prefetch: int | None, workers: int) -> int:
    """Batches kept in flight on ``workers`` workers: ``prefetch`` when set, else two
    per worker (the one rule; the settings, the tuner and ``auto`` all use it).

    Example:
        >>> in_flight(None, 3), in_flight(5, 3)
        (6, 5)
    """
    return prefetch or 2 * workers


FIRST_DECISION = 4
"""Batches measured before the first decision."""
LATER_DECISIONS = 32
"""Batches between later decisions (tuning goes on slowly)."""
MAX_AUTO_WORKERS = 8
"""``num_workers="auto"`` starts at most this many process workers."""
THREADS_PER_CORE = 4
"""Thread workers per core for a pipeline that releases the GIL (I/O waits overlap)."""
MAX_AUTO_THREADS = 16
"""``num_workers="auto"`` starts at most this many thread workers."""
DEFAULT_MEMORY_BUDGET = 1 << 30
"""Bytes that the batches in flight may take (``prefetch="auto"``): 1 GiB."""
UNSIZED_BATCHES = 4 * MAX_AUTO_THREADS
"""The most batches in flight (and thread workers) when a batch's size is unknown."""
WAITING = 0.10
"""A consumer that waits this fraction of the time or more is waiting for batches."""
IDLE = 0.03
"""A consumer that waits less than this fraction is never kept waiting."""
HURT = 1.5
"""Workers hurt when the consumer waits this many times the work of a batch for them
(in two windows in a row: one slow moment of the machine decides nothing)."""
CLEAR_HURT = 2.5
"""A window where the consumer waited this many times the work of a batch, and less
than :data:`HANDOFF_SECONDS` a batch, decides on its own: its wait is the hand-off
(queues, wake-ups), paid by every batch, not a stall of the machine (milliseconds)."""
HANDOFF_SECONDS = 1e-3
"""A wait or a job shorter than this a batch is on the scale of a hand-off."""
CPU_SHARE = 0.3
"""A short job whose CPU time is at least this share of its wall time spent the rest
waiting for the GIL (or a core), not on I/O: inline, it costs its CPU time."""
BACK_TO_WORKERS = 3.0
"""Inline, a batch costing this many times the wait seen with workers goes back to them."""
TRY_INLINE = 0.75
"""Inline is worth a try when the consumer waits for workers this share of the work of
a batch or more (in two of three windows): workers that were doing their job in
parallel would have it waiting for about the work divided by their number."""
TRIAL_BATCHES = 16
"""Batches built inline on a try (after the batches already in flight came out): enough
to take in the occasional batch that reads a block of the source."""
TRIAL_WINS = 0.9
"""A try keeps inline when its wall time a batch is below this share of the last
windows' on workers."""
TRIAL_BACKOFF = 4
"""Windows on workers after a try that failed before the next one (doubling)."""
MIN_WORK_SECONDS = 1e-6  # below the clock's resolution: treated as this


def auto_num_workers(threads: bool = False) -> int:
    """The worker count ``num_workers="auto"`` settles to when the loader is built.

    Processes: one per usable core, at most 8. Threads (a pipeline that releases the
    GIL, whose records often wait on files or the network): four per core, at most
    16. Where the tuner sizes the threads (map-style data, see
    :func:`stoker._exec.make.handover_applies`) they start at two per core, at most
    this, and grow or shrink from there (:mod:`stoker._sizing`); elsewhere (streams,
    a ``worker_init_fn``) this is the count.

    Example:
        >>> 1 <= auto_num_workers() <= MAX_AUTO_WORKERS
        True
        >>> auto_num_workers(threads=True) >= auto_num_workers()
        True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if threads:
        return max(1, min(THREADS_PER_CORE * cores, MAX_AUTO_THREADS))
    return max(1, min(cores, MAX_AUTO_WORKERS))


@dataclass(frozen=True)
class Window:
    """What the loader measured over a window of consecutive batches.

    Attributes:
        batches: batches handed to the consumer in the window.
        work_seconds: time spent building them (reading, transforms, collate), summed.
        wait_seconds: time the consumer spent inside ``next()``, summed.
        elapsed_seconds: wall time the window took.
        batch_bytes: bytes of one batch (0 when unknown).
        inline: whether the window ran inline (jobs built in ``next()``).
        worker_seconds: the workers' wall time on the window's jobs, summed.
        cpu_seconds: their CPU time on them.
        cpu_wait_seconds: their time waiting for a CPU (runnable, not running).
        first: the window is a pass's first batch, whose time includes starting
            the pass: only the thread count is decided from it.
    """

    batches: int
    work_seconds: float
    wait_seconds: float
    elapsed_seconds: float
    batch_bytes: int = 0
    inline: bool = False
    worker_seconds: float = 0.0
    cpu_seconds: float = 0.0
    cpu_wait_seconds: float = 0.0
    first: bool = False


@dataclass(frozen=True)
class Decision:
    """What the tuner wants now: inline or workers, batches in flight, and why; and
    the number of workers (changed only by a tuner with a :class:`ThreadSizer`)."""

    inline: bool
    depth: int
    reason: str
    workers: int
    trial: bool = False
    """Inline for a few batches, to measure it (see :data:`TRIAL_BATCHES`)."""


class Tuner:
    """Decides inline vs workers and the batches in flight from measured windows.

    Example:
        >>> t = Tuner(num_workers=2)
        >>> t.decision.depth, t.due(8)
        (4, True)
        >>> # tiny records: workers keep the consumer waiting longer than building
        >>> hurt = Window(8, work_seconds=8e-5, wait_seconds=1.6e-4, elapsed_seconds=3e-4)
        >>> t.observe(hurt).inline  # 2x the work once may be a slow moment
        False
        >>> d = t.observe(hurt)
        >>> d.inline, d.depth
        (True, 1)

    Args:
        num_workers: the workers started (what "workers" means below).
        depth: batches in flight to start with (default ``2 * num_workers``).
        auto_depth: tune ``depth`` (``prefetch="auto"``); else keep it.
        auto_inline: allow the inline decision (``worker_mode="auto"``).
        memory_budget: bytes the batches in flight may take.
        sizer: chooses the thread count (``num_workers="auto"`` on threads); None
            keeps ``num_workers``.
    """

    def __init__(
        self,
        num_workers: int,
        depth: int | None = None,
        *,
        auto_depth: bool = True,
        auto_inline: bool = True,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        sizer: ThreadSizer | None = None,
    ) -> None:
        self.sizer = sizer
        self.num_workers = max(1, num_workers if sizer is None else sizer.workers)
        self.auto_depth = auto_depth
        self.auto_inline = auto_inline
        self.memory_budget = memory_budget
        start = depth if depth is not None else in_flight(None, self.num_workers)
        self.decision = Decision(
            False, max(1, start), "starting: workers, as configured", self.num_workers
        )
        self.history: list[Decision] = []
        self._worker_wait = 0.0  # per batch, in the last window on workers
        self._batch_bytes = 0
        self._next_at = FIRST_DECISION
        self._suspect = False  # the last window said workers hurt: one more to confirm
        self._worth_trying: deque[bool] = deque(maxlen=3)  # the last windows on workers
        self._worker_windows: deque[tuple[float, int]] = deque(maxlen=3)  # wall time, batches
        self._before_trial = self.decision  # what a try that fails goes back to
        self._no_trial = 0  # windows on workers before the next try
        self._failed_trials = 0

    def due(self, batches: int) -> bool:
        """True when ``batches`` (handed out since the last decision) call for one."""
        return batches >= self._next_at

    @property
    def workers(self) -> int:
        """The number of workers wanted now."""
        return self.sizer.workers if self.sizer is not None else self.num_workers

    @property
    def sized(self) -> bool:
        """True unless a thread count is still to be decided from a first batch."""
        return self.sizer is None or self.sizer.sized

    def budget_batches(self) -> int:
        """The batches the memory budget holds; while the size of a batch is unknown
        (not NumPy arrays), :data:`UNSIZED_BATCHES`."""
        if self._batch_bytes > 0:
            return max(1, self.memory_budget // self._batch_bytes)
        return UNSIZED_BATCHES

    def max_depth(self) -> int:
        """The most batches in flight: four per worker, within the memory budget."""
        return max(1, min(4 * self.workers, self.budget_batches()))

    def observe(self, window: Window) -> Decision:
        """Take one window's measurements; the decision for the next one."""
        if window.batch_bytes > 0:
            self._batch_bytes = window.batch_bytes
        if window.first:
            return self._size_first(window)
        self._next_at = max(LATER_DECISIONS, self.workers)
        if window.batches <= 0:
            return self.decision
        work = max(window.work_seconds / window.batches, MIN_WORK_SECONDS)
        wait = window.wait_seconds / window.batches
        current = self.decision
        if window.inline and current.trial:
            decision = self._judge_trial(window)
        elif window.inline:
            decision = self._from_inline(current, work)
        else:
            self._worker_wait = wait
            decision = self._from_workers(current, work, wait, window)
        if decision != current:
            self.history.append(decision)
        self.decision = decision
        return decision

    def _from_inline(self, current: Decision, work: float) -> Decision:
        if work > BACK_TO_WORKERS * max(self._worker_wait, MIN_WORK_SECONDS):
            depth = min(in_flight(None, self.workers), self.max_depth())
            return Decision(
                False,
                depth,
                f"a batch now costs {_ms(work)} to build, more than {BACK_TO_WORKERS:g}x the "
                f"{_ms(self._worker_wait)} the consumer waited for workers: back to workers",
                self.workers,
            )
        return current

    def _judge_trial(self, w: Window) -> Decision:
        """Inline or workers, from the batches a try built inline: their wall time
        against the last windows' on workers."""
        inline = w.elapsed_seconds / w.batches
        elapsed = sum(seconds for seconds, _ in self._worker_windows)
        on_workers = elapsed / max(1, sum(n for _, n in self._worker_windows))
        if inline < TRIAL_WINS * on_workers:
            self._failed_trials = 0
            return self._inline(
                f"built inline, a batch took {_ms(inline)}, against {_ms(on_workers)} with "
                f"workers: {_BUILT_INLINE}"
            )
        self._failed_trials += 1
        self._no_trial = TRIAL_BACKOFF << (self._failed_trials - 1)
        return replace(
            self._before_trial,
            reason=f"built inline, a batch took {_ms(inline)}, against {_ms(on_workers)} with "
            "workers: workers",
        )

    def _try_inline(self, current: Decision, worth: bool, w: Window) -> Decision | None:
        """A try of inline when the last windows call for one (None: not now)."""
        self._worker_windows.append((w.elapsed_seconds, w.batches))
        self._worth_trying.append(worth)
        if self._no_trial > 0:
            self._no_trial -= 1
            return None
        if not worth:
            return None
        if sum(self._worth_trying) < 2:
            self._next_at = FIRST_DECISION  # look again soon
            return None
        self._worth_trying.clear()
        self._before_trial = current
        self._next_at = TRIAL_BATCHES
        return self._inline(
            f"next() waited {_ms(w.wait_seconds / w.batches)} a batch for workers, about "
            f"what building one costs: trying {TRIAL_BATCHES} batches inline",
            trial=True,
        )

    def _inline(self, reason: str, trial: bool = False) -> Decision:
        """Batches built on the consumer's thread, one at a time, for ``reason``."""
        return Decision(True, 1, reason, self.workers, trial)

    def _size_first(self, window: Window) -> Decision:
        """The thread count from a pass's first batch (the other rules wait for a
        window of batches)."""
        current = self.decision
        if self.sizer is None or self.sizer.sized or current.inline:
            return current
        decision = self._resize(current, window, None, waiting=True) or current
        if decision != current:
            self.history.append(decision)
            self.decision = decision
        return decision

    def _resize(
        self, current: Decision, w: Window, rate: float | None, waiting: bool
    ) -> Decision | None:
        """The decision with the sizer's new thread count, or None when it keeps it."""
        if self.sizer is None:
            return None
        why = self.sizer.observe(
            rate,
            busy=w.worker_seconds,
            cpu=w.cpu_seconds,
            cpu_wait=w.cpu_wait_seconds,
            waiting=waiting,
            # A fixed prefetch bounds the jobs in flight: more threads would find none.
            cap=self.budget_batches() if self.auto_depth else current.depth,
        )
        if why is None:
            return None
        n = self.sizer.workers
        depth = current.depth
        if self.auto_depth:  # two batches in flight a thread, within the budget
            depth = max(n, min(in_flight(None, n), self.budget_batches()))
        return replace(current, depth=max(1, depth), reason=why, workers=n)

    def _from_workers(self, current: Decision, work: float, wait: float, w: Window) -> Decision:
        fraction = w.wait_seconds / w.elapsed_seconds if w.elapsed_seconds > 0 else 0.0
        rate = w.batches / w.elapsed_seconds if w.elapsed_seconds > 0 else None
        resized = self._resize(current, w, rate, waiting=fraction >= WAITING)
        if resized is not None:
            # Look again soon, for the check: once every thread finished a job or so.
            self._next_at = max(FIRST_DECISION, resized.workers)
            return resized
        cost = _inline_cost(work, w)
        hurt = self.auto_inline and wait > HURT * cost
        clear = hurt and wait < HANDOFF_SECONDS and wait > CLEAR_HURT * cost
        confirmed = hurt and (self._suspect or clear)
        self._suspect = hurt and not confirmed
        if self._suspect:
            self._next_at = FIRST_DECISION  # look again soon
        if confirmed:
            return self._inline(
                f"next() waited {_ms(wait)} a batch for workers, more than the {_ms(cost)} "
                f"it takes to build one: {_BUILT_INLINE}"
            )
        worth = self.auto_inline and wait >= TRY_INLINE * cost
        trial = self._try_inline(current, worth, w)
        if trial is not None:
            return trial
        depth = min(current.depth, self.max_depth())
        reason = current.reason
        if self.auto_depth and fraction >= WAITING and depth < self.max_depth():
            depth = min(self.max_depth(), depth + max(1, self.workers // 2))
            reason = f"the consumer waited {fraction:.0%} of the time: {depth} batches in flight"
        elif self.auto_depth and fraction < IDLE and depth > self.workers:
            depth -= 1
            reason = (
                f"batches were always ready (waited {fraction:.1%} of the time): "
                f"{depth} batches in flight are enough"
            )
        elif depth != current.depth:
            reason = f"{depth} batches in flight fit the memory budget"
        else:
            reason = f"the consumer waited {fraction:.0%} of the time: {depth} batches in flight"
        if current.inline:
            reason = "workers: " + reason
        return Decision(False, depth, reason, self.workers)


def _inline_cost(work: float, w: Window) -> float:
    """What building one of the window's batches on the consumer's thread would cost:
    the workers' time on it, or for a job shorter than a hand-off, its CPU time when
    that is less and at least :data:`CPU_SHARE` of the wall time (the rest of a short
    job's wall time on a thread is then waiting for the GIL, held by the other workers
    and the consumer; a job that mostly waits on I/O would wait as long inline)."""
    if work >= HANDOFF_SECONDS or w.cpu_seconds <= 0 or w.batches <= 0:
        return work
    cpu = w.cpu_seconds / w.batches
    if cpu < CPU_SHARE * work:  # mostly waiting on I/O: inline would wait as long
        return work
    return max(min(work, cpu), MIN_WORK_SECONDS)


_BUILT_INLINE = "the hand-off costs more than the work, so batches are built inline"


def _ms(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.1f} ms"
