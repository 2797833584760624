"""``Autotune``: an iterator's side of ``worker_mode="auto"``.

After each batch it hands the tuner (:mod:`stoker._tuning`) what the window of jobs
and the tally measured, and applies the decision to the
:class:`~stoker._exec.handover.HandoverExecutor` and the window: inline or workers,
and how many batches are in flight. It never changes which batches come out, nor
the state: it only changes who builds them and how far ahead.
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
        self._apply(executor.tuner.decision)
        self._mark()
        self._first = True

    def _mark(self) -> None:
        self._start = time.perf_counter()
        self._wait = self._window.wait_seconds
        self._work = self._tally.fetch_seconds + self._tally.collate_seconds
        self._batches = 0

    def _apply(self, decision: Decision) -> None:
        ex = self.executor
        ex.inline = decision.inline and ex.tuner.auto_inline
        if not ex.inline:
            self._window.depth = decision.depth
        elif self._window.ordered:
            # No new jobs: once the window is empty the iterator builds batches on
            # its own thread, from the plan (see ``go_inline``).
            self._window.depth = 0
        else:  # batches handed out ahead: keep the window, jobs run on submit
            self._window.depth = 1

    @property
    def go_inline(self) -> bool:
        """True when the iterator should now build its batches itself: the tuner chose
        inline, batches come in order, and no job is left in the window."""
        return (
            self.executor.inline
            and self._window.ordered
            and not self._window.in_flight()
            and not ahead_of(self._window.state())
        )

    def step(self, batch: Any) -> None:
        """Count one batch handed out; decide when a window of batches is complete."""
        ex = self.executor
        if self._first or not ex.settled:
            # Measure the executor the loader settles on, from its second batch: the
            # first one includes starting the pass.
            self._first = False
            self._mark()
            return
        self._batches += 1
        tuner = ex.tuner
        if not tuner.due(self._batches):
            return
        work = self._tally.fetch_seconds + self._tally.collate_seconds - self._work
        window = Window(
            batches=self._batches,
            work_seconds=work,
            wait_seconds=self._window.wait_seconds - self._wait,
            elapsed_seconds=time.perf_counter() - self._start,
            batch_bytes=_nbytes(batch),
            inline=ex.inline,
        )
        before = tuner.decision
        decision = tuner.observe(window)
        if decision != before:
            _log.info("stoker auto: %s", decision.reason)
        self._apply(decision)
        self._mark()


def _nbytes(batch: Any) -> int:
    if isinstance(batch, np.ndarray):
        return int(batch.nbytes)
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, tuple | list):
        return sum(_nbytes(v) for v in batch[:64])
    return 0
