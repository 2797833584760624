"""``Watchdog``: when no batch comes for a while, say what the loader is stuck on.

With the default ``timeout=None`` a record that never finishes would hang the loop
silently. The watchdog does not raise (``timeout`` does that): the window that
``next()`` waits in wakes every ``seconds`` and, the first time a wait passes them
without a batch, logs one warning (logger ``"stoker"``) naming the batches and
samples in flight and the Python stacks of the workers (or threads) reading them,
and keeps the same text for ``it.stats().watchdog``. It runs on the waiting
caller's thread, which is idle anyway: no thread of its own.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable

__all__ = ["Watchdog", "describe_jobs", "thread_stack"]

log = logging.getLogger("stoker")


def thread_stack(thread: threading.Thread | None) -> str:
    """The Python stack of a running thread, most recent call last."""
    ident = thread.ident if thread is not None else None
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return "    (not running)\n"
    return "".join(traceback.format_stack(frame))


def describe_jobs(jobs: Iterable[tuple[int, str, list[int]]], limit: int = 16) -> str:
    """Lines naming batches in flight: (batch index, where, sample indices)."""
    lines = []
    for seq, where, samples in jobs:
        shown = ", ".join(map(str, samples[:limit])) + (", …" if len(samples) > limit else "")
        lines.append(f"  batch {seq} ({where}): samples [{shown}]")
    return "\n".join(lines) if lines else "  (no batch job in flight)"


class Watchdog:
    """Watches the waits of one iterator's ``next()`` calls.

    The window calls :meth:`begin` when ``next()`` starts, waits at most
    :meth:`step` seconds at a time, and calls :meth:`check` after each wait that
    ended without a batch.

    Example:
        >>> w = Watchdog(30.0, lambda: "batch 3")
        >>> w.begin(); w.step(None) <= 30.0, w.findings
        (True, None)
    """

    def __init__(self, seconds: float, describe: Callable[[], str]) -> None:
        self.seconds = seconds
        self._describe = describe
        self._since = time.monotonic()
        self._reported = False
        self.findings: str | None = None

    def begin(self) -> None:
        """``next()`` starts waiting for a batch."""
        self._since = time.monotonic()
        self._reported = False

    def step(self, left: float | None) -> float | None:
        """How long the next wait may last: ``left`` (None: no limit), or less, so
        that the watchdog gets to look when its time comes."""
        if self._reported:
            return left
        due = max(0.0, self._since + self.seconds - time.monotonic())
        return due if left is None else min(left, due)

    def check(self) -> None:
        """After a wait without a batch: report once when ``seconds`` have passed."""
        waited = time.monotonic() - self._since
        if self._reported or waited < self.seconds:
            return
        self._reported = True
        try:
            found = self._describe()
        except Exception as exc:  # a report must never break the loader
            found = f"(could not describe the work in flight: {type(exc).__name__}: {exc})"
        text = (
            f"no batch for {waited:.1f} s (watchdog={self.seconds:g}); in flight:\n{found}\n"
            "a record may be stuck (the stacks show where); pass timeout= to raise "
            "LoaderTimeout instead, or watchdog=None to silence this"
        )
        self.findings = text
        log.warning("stoker: %s", text)
