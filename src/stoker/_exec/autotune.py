"""``Autotune``: an iterator's side of ``worker_mode="auto"``.

After each batch it hands the tuner (:mod:`stoker._tuning`) what the window of jobs
and the tally measured, and applies the decision to the
:class:`~stoker._exec.handover.HandoverExecutor` and the window: inline or workers,
how many batches are in flight and (``num_workers="auto"`` on threads) how many
threads build them. It never changes which batches come out, nor the state: it only
changes who builds them and how far ahead.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from .._state import ahead_of
from .._tuning import Decision, Window
from .handover import HandoverExecutor
from .jobs import Tally

__all__ = ["Autotune"]

_log = logging.getLogger("stoker")


class Autotune:
    """Hands the tuner what one iterator measured and applies its decisions.

    Holds the executor, the window and the tally, never the iterator.
    """

    @classmethod
    def of(cls, executor: object, window: Any, tally: Tally) -> Autotune | None:
        """The tuner of a pass whose jobs go through ``window`` (a job window, or None)
        on ``executor``: None unless that is a :class:`HandoverExecutor`
        (``worker_mode="auto"``)."""
        if not isinstance(executor, HandoverExecutor) or window is None:
            return None
        return cls(executor, window, tally)

    def __init__(self, executor: HandoverExecutor, window: Any, tally: Tally) -> None:
        self.executor = executor
        """The executor this tuner steers."""
        self._window = window
        self._tally = tally
        self._drain = 0  # batches still to come from workers before a try of inline
        self._apply(executor.tuner.decision)
        self._mark()
        self._first = True

    def _mark(self) -> None:
        tally = self._tally
        self._start = time.perf_counter()
        self._wait = self._window.wait_seconds
        self._work = tally.fetch_seconds + tally.collate_seconds
        self._busy = (tally.work_seconds, tally.cpu_seconds, tally.cpu_wait_seconds)
        self._batches = 0

    def _measured(self, batch: Any, first: bool = False) -> Window:
        """What the jobs handed out since the last mark measured."""
        tally = self._tally
        busy, cpu, cpu_wait = self._busy
        return Window(
            batches=max(1, self._batches) if first else self._batches,
            work_seconds=tally.fetch_seconds + tally.collate_seconds - self._work,
            wait_seconds=self._window.wait_seconds - self._wait,
            elapsed_seconds=time.perf_counter() - self._start,
            batch_bytes=_nbytes(batch),
            inline=self.executor.inline,
            worker_seconds=tally.work_seconds - busy,
            cpu_seconds=tally.cpu_seconds - cpu,
            cpu_wait_seconds=tally.cpu_wait_seconds - cpu_wait,
            first=first,
        )

    def _decide(self, window: Window) -> None:
        tuner = self.executor.tuner
        before = tuner.decision
        decision = tuner.observe(window)
        if decision != before:
            _log.info("stoker auto: %s", decision.reason)
        if decision.trial and not before.trial:  # the try is timed from its first batch
            self._drain = len(self._window.in_flight())
        self._apply(decision)

    def _apply(self, decision: Decision) -> None:
        ex = self.executor
        ex.inline = decision.inline and ex.tuner.auto_inline
        if not ex.inline:
            self._window.depth = decision.depth
        elif self._window.ordered and not decision.trial:
            # No new jobs: once the window is empty the iterator builds batches on
            # its own thread, from the plan (see ``go_inline``).
            self._window.depth = 0
        else:  # a try, or batches handed out ahead: keep the window, jobs run on submit
            self._window.depth = 1
        if ex.tuner.sizer is not None and decision.workers != ex.workers:
            if decision.workers > ex.workers and not ex.inline:
                self._window.fill()  # queued first: each new thread takes one as it starts
            ex.resize(decision.workers)

    @property
    def go_inline(self) -> bool:
        """True when the iterator should now build its batches itself: the tuner chose
        inline, batches come in order, and no job is left in the window."""
        return (
            self.executor.inline
            and not self.executor.tuner.decision.trial
            and self._window.ordered
            and not self._window.in_flight()
            and not ahead_of(self._window.state())
        )

    def step(self, batch: Any) -> None:
        """Count one batch handed out; decide when a window of batches is complete."""
        ex = self.executor
        if self._first or not ex.settled:
            # Measure the executor the loader settles on, from its second batch: the
            # first one includes starting the pass. Only a thread count still to be
            # decided is decided from it (I/O-bound pipelines grow at once).
            if self._first and not ex.tuner.sized and not ex.inline:
                self._decide(self._measured(batch, first=True))
            self._first = False
            self._mark()
            return
        if self._drain > 0:  # built by workers before the try: not part of it
            self._drain -= 1
            self._mark()
            return
        self._batches += 1
        if not ex.tuner.due(self._batches):
            return
        self._decide(self._measured(batch))
        self._mark()


def _nbytes(batch: Any) -> int:
    if isinstance(batch, np.ndarray):
        return int(batch.nbytes)
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, tuple | list):
        return sum(_nbytes(v) for v in batch[:64])
    return 0
