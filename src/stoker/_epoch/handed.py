"""``HandedOut``: the state after the batches handed out so far, in any order.

When every job is one batch, the window may hand a finished batch out before an
earlier one still in work (``ordered=False``). The state then is the one after the
last batch of the unbroken run from the start, plus the batches handed out ahead
of the first missing one (``"ahead"``), so that a restore skips exactly those.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._state import with_ahead
from .jobs import Job

__all__ = ["HandedOut"]


class HandedOut:
    """Which batches (by job ``seq``) were handed out, and the state after them.

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> jobs = [Job(s, "build", ((Context(), np.array([s])),), "", {"b": s + 1})
        ...         for s in range(3)]
        >>> out = HandedOut({"b": 0}, ())
        >>> out.planned(jobs[0]), out.planned(jobs[1])
        (True, True)
        >>> out.hand_out(jobs[1]), out.state()
        (False, {'b': 0, 'ahead': [1]})
        >>> out.hand_out(jobs[0]), out.state()
        (False, {'b': 2})
    """

    def __init__(self, start_state: dict[str, Any], ahead: Iterable[int]) -> None:
        self._skip = set(ahead)  # handed out before a restore: never planned again
        self._out: set[int] = set(self._skip)  # handed out past the first missing one
        self._low_state = start_state
        self._states: dict[int, dict[str, Any]] = {}
        self._low: int | None = None  # the first batch not handed out

    def planned(self, job: Job) -> bool:
        """Note a job planned; False when its batch was handed out before the restore
        (it is then counted as handed out, and not run)."""
        if self._low is None:
            self._low = job.seq
        if job.seq not in self._skip:
            return True
        self._skip.discard(job.seq)
        self.hand_out(job)
        return False

    def hand_out(self, job: Job) -> bool:
        """Count job ``seq``'s batch as handed out (or lost to an error); True when it
        was simply the next one (:meth:`in_order`)."""
        seq = job.seq
        if seq == self._low and not self._out:  # in order: the usual case
            if job.state is not None:
                self._low_state = job.state
            self._low = seq + 1
            return True
        self._out.add(seq)
        if job.state is not None:
            self._states[seq] = job.state
        while self._low is not None and self._low in self._out:
            self._out.discard(self._low)
            self._low_state = self._states.pop(self._low, self._low_state)
            self._low += 1
        return self.in_order(job)

    def in_order(self, job: Job) -> bool:
        """True when ``job``'s batch, just handed out, was simply the next one (its own
        state is then the state after it)."""
        return not self._out and self._low == job.seq + 1

    def state(self) -> dict[str, Any]:
        """The state after the batches handed out so far."""
        if not self._out:
            return self._low_state
        ahead = sorted(s for s in self._out if self._low is None or s >= self._low)
        return with_ahead(self._low_state, ahead)
