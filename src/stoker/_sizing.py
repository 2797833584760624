"""How many thread workers: the policy behind ``num_workers="auto"`` on threads.

A thread worker spends a job's wall time in three ways: on a CPU, waiting for a CPU
(runnable, in the scheduler's queue), and waiting on something else (a file, the
network, a lock, the GIL). The workers report the three sums; :class:`ThreadSizer`
turns them into a thread count. It is pure (no clocks, no threads): every rule is
tested on synthetic numbers.

The rules, in words:

* **The estimate.** A thread that spends ``c`` seconds a job on a CPU and ``i``
  waiting on I/O keeps ``c / (c + i)`` of a core busy, so ``cores * (c + i) / c``
  threads keep every core busy. Time spent waiting for a CPU counts for neither:
  threads that wait for a CPU are too many, not too few. And when they wait for a CPU
  at least as long as on anything else, the cores are what they lack: their other
  waits then are contention that more threads only add to (the GIL, a lock), not
  I/O, and the estimate is the core count. (A change it causes is checked like any
  other: were those waits I/O after all, fewer threads are slower and undone.)
* **Grow** to the estimate when it is clearly above the count (1.25x, and one
  thread more at least) and the consumer waits for batches; **shrink** to it when
  it is clearly below (0.75x).
  The first batch (a change it causes cannot be checked) only grows the count, and
  only when the threads mostly wait on I/O (an estimate 4x the count or more):
  I/O-bound pipelines jump to their count at once; the rest wait for the first
  window of batches. (Fewer threads than the estimate are not always faster: on a
  machine busy with other work, more threads get a larger share of its cores.)
* **Every later change is checked** in the next window: a larger count that did not
  raise the batches per second by 10 %, or a smaller one that lowered them by more
  than 10 %, is undone, and the count stays for a while (it is re-checked after
  :data:`RECHECK` windows).
* **Caps**: at most ``max_workers`` threads, and at most as many as there are batches
  the memory budget holds in flight (a thread builds one batch at a time).
"""

from __future__ import annotations

__all__ = ["GAIN", "GROW", "LOSS", "MAX_GROWN_THREADS", "RECHECK", "SHRINK", "ThreadSizer"]

MAX_GROWN_THREADS = 128
"""The most thread workers ``num_workers="auto"`` grows to."""
START_PER_CORE = 2
"""Thread workers per core to start with (the first batch then says how many)."""
GROW = 1.25
"""Grow when the estimate is at least this many times the count."""
FIRST_GROW = 4.0
"""From the first batch (a change that is not checked), grow only when the estimate is
at least this many times the count: the threads mostly wait on I/O. Starting a pass
(opening files, imports) looks like I/O too, and less than that may be no more.
The first batch never shrinks the count."""
SHRINK = 0.75
"""Shrink when the estimate is at most this many times the count."""
GAIN = 1.10
"""A larger count must raise the batches per second by this factor to be kept."""
LOSS = 0.90
"""A smaller count is kept unless the batches per second fall below this factor."""
RECHECK = 8
"""Windows during which a count found not to help is not tried again."""


class ThreadSizer:
    """Chooses the number of thread workers from what they measured.

    Example:
        >>> s = ThreadSizer(start=4, cores=2, max_workers=64)
        >>> # first batch: 1 ms of CPU and 99 ms of I/O per 100 ms of work
        >>> s.observe(None, busy=0.4, cpu=0.004, cpu_wait=0.0, waiting=True, cap=64)
        'the workers waited on I/O 99% of their time: 64 threads'
        >>> s.workers
        64

    Args:
        start: threads to start with.
        cores: the cores this process may use.
        max_workers: the most threads ever.
    """

    def __init__(self, start: int, cores: int, max_workers: int = MAX_GROWN_THREADS) -> None:
        self.max_workers = max(1, max_workers)
        self.workers = max(1, min(start, self.max_workers))
        """The thread count wanted now."""
        self.cores = max(1, cores)
        self.sized = False
        """True once a first measurement decided the count."""
        self._before: tuple[int, float] | None = None  # (count, batches/s) before a change
        self._ceiling: int | None = None  # no count from this one up is tried for a while
        self._floor: int | None = None  # nor from this one down
        self._held = 0  # windows since a count was undone

    @classmethod
    def starting(cls, cores: int, most: int, max_workers: int = MAX_GROWN_THREADS) -> ThreadSizer:
        """A sizer starting at two threads per core, at most ``most``.

        Example:
            >>> ThreadSizer.starting(cores=2, most=16).workers
            4
        """
        return cls(min(most, START_PER_CORE * max(1, cores)), cores, max_workers)

    def estimate(self, busy: float, cpu: float, cpu_wait: float) -> float | None:
        """Threads that keep every core busy, from the workers' summed job times
        (wall ``busy``, ``cpu`` on a CPU, ``cpu_wait`` waiting for one); None
        without CPU time to go by. Threads that wait for a CPU at least as long as on
        anything else get the core count.

        Example:
            >>> ThreadSizer(2, cores=2).estimate(busy=1.0, cpu=0.5, cpu_wait=0.0)
            4.0
            >>> ThreadSizer(8, cores=2).estimate(busy=1.0, cpu=0.25, cpu_wait=0.75)
            2.0
            >>> ThreadSizer(4, cores=2).estimate(busy=1.0, cpu=0.45, cpu_wait=0.4)
            2.0
        """
        if cpu <= 0.0 or busy <= 0.0:
            return None
        if cpu_wait >= busy - cpu - cpu_wait:  # short of cores: other waits are contention
            return float(self.cores)
        return self.cores * max(cpu, busy - cpu_wait) / cpu

    def observe(
        self,
        rate: float | None,
        *,
        busy: float,
        cpu: float,
        cpu_wait: float,
        waiting: bool,
        cap: int,
    ) -> str | None:
        """Take one window; the reason when :attr:`workers` changed, else None.

        Args:
            rate: batches per second in the window (None for the first batch, whose
                time includes starting the pass: a change it causes is not checked).
            busy: the workers' wall time on the window's jobs, summed.
            cpu: their CPU time on them.
            cpu_wait: their time waiting for a CPU (0.0 where the system cannot say).
            waiting: the consumer waited for batches (more threads could help).
            cap: the most threads the memory budget allows.
        """
        cap = max(1, min(cap, self.max_workers))
        checked = self._check(rate, cap)
        if checked is not None:
            return checked
        guess = self.estimate(busy, cpu, cpu_wait)
        if guess is None:
            return None
        self.sized = True
        n = self.workers
        io = max(0.0, 1.0 - (cpu + cpu_wait) / busy)
        grow = GROW if rate is not None else FIRST_GROW
        if guess >= max(grow * n, n + 1) and waiting and n < cap and self._may_try(n + 1):
            new = min(cap, round(guess))
            return self._change(new, rate, f"the workers waited on I/O {io:.0%} of their time")
        if guess <= SHRINK * n and n > 1 and rate is not None and self._may_try(n - 1):
            new = max(1, round(guess))
            share = cpu_wait / busy
            return self._change(
                new, rate, f"the workers waited for a CPU {share:.0%} of their time"
            )
        if n > cap:
            return self._change(cap, None, "the memory budget")
        return None

    def _may_try(self, count: int) -> bool:
        above = self._ceiling is not None and count >= self._ceiling
        below = self._floor is not None and count <= self._floor
        return not (above or below)

    def _change(self, new: int, rate: float | None, why: str) -> str | None:
        if new == self.workers:
            return None
        self._before = (self.workers, rate) if rate is not None else None
        self.workers = new
        return f"{why}: {new} threads"

    def _check(self, rate: float | None, cap: int) -> str | None:
        """Undo the last change if the batches per second say it did not help."""
        before, self._before = self._before, None
        if self._ceiling is not None or self._floor is not None:
            self._held += 1
            if self._held >= RECHECK:  # re-check slowly: every count may be tried again
                self._ceiling = self._floor = None
        if before is None or rate is None:
            return None
        old, old_rate = before
        n = self.workers
        if n > old and rate < GAIN * old_rate:
            self._ceiling, self._held, self.workers = old + 1, 0, min(old, cap)
            return (
                f"{n} threads were no faster than {old} ({rate:.1f} against {old_rate:.1f} "
                f"batches/s): back to {self.workers} threads"
            )
        if n < old and rate < LOSS * old_rate:
            self._floor, self._held, self.workers = old - 1, 0, min(old, cap)
            return (
                f"{n} threads were slower than {old} ({rate:.1f} against {old_rate:.1f} "
                f"batches/s): back to {self.workers} threads"
            )
        return None
