"""``Watchdog``: when no batch comes for a while, say what the loader is stuck on.

With the default ``timeout=None`` a record that never finishes would hang the loop
silently. The watchdog does not raise (``timeout`` does that); after ``seconds``
without a batch it logs one warning (logger ``"stoker"``) naming the batches and
samples in flight and the Python stacks of the workers (or threads) reading them,
and keeps the same text for ``it.stats().watchdog``.
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

_JOIN_SECONDS = 5.0


def thread_stack(thread: threading.Thread | int | None) -> str:
    """The Python stack of a running thread (or thread id), most recent call last."""
    ident = thread.ident if isinstance(thread, threading.Thread) else thread
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return "    (not running)\n"
    return "".join(traceback.format_stack(frame))


class Watchdog:
    """Watches one iterator's ``next()`` calls from a thread of its own.

    Example:
        >>> w = Watchdog(30.0, lambda caller: "batch 3", "demo")
        >>> w.waiting(); w.arrived(); w.close()
        >>> w.findings is None
        True

    Resources:
        Owns one daemon thread (``stoker-watchdog-…``), started by the first
        :meth:`waiting`; :meth:`close` (idempotent) wakes and joins it. While no
        ``next()`` waits it sleeps on a condition, waking every ``seconds``.

    Errors:
        None: a ``describe`` that raises is reported in the warning instead.
    """

    def __init__(self, seconds: float, describe: Callable[[int | None], str], name: str) -> None:
        self.seconds = seconds
        self._describe = describe
        self._name = name
        self._cond = threading.Condition()
        self._since: float | None = None  # when the current next() started waiting
        self._reported = False  # the current wait was reported already
        self._caller: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.findings: str | None = None

    def waiting(self) -> None:
        """``next()`` starts waiting for a batch (on the caller's thread)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._caller = threading.get_ident()
        self._reported = False
        self._since = time.monotonic()

    def arrived(self) -> None:
        """``next()`` returned (a batch, an error or the end)."""
        self._since = None

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                since = self._since
                if since is None or self._reported:
                    self._cond.wait(self.seconds)
                    continue
                left = since + self.seconds - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._reported = True
                self._cond.release()
                try:
                    self._report(time.monotonic() - since)
                finally:
                    self._cond.acquire()

    def _report(self, waited: float) -> None:
        try:
            found = self._describe(self._caller)
        except Exception as exc:  # a report must never break the loader
            found = f"(could not describe the work in flight: {type(exc).__name__}: {exc})"
        text = (
            f"no batch for {waited:.1f} s (watchdog={self.seconds:g}); in flight:\n{found}\n"
            "a record may be stuck (the stacks show where); pass timeout= to raise "
            "LoaderTimeout instead, or watchdog=None to silence this"
        )
        self.findings = text
        log.warning("stoker: %s", text)

    def close(self) -> None:
        """End the thread (idempotent)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_SECONDS)


def describe_jobs(jobs: Iterable[tuple[int, str, list[int]]], limit: int = 16) -> str:
    """Lines naming batches in flight: (batch index, where, sample indices)."""
    lines = []
    for seq, where, samples in jobs:
        shown = ", ".join(map(str, samples[:limit])) + (", …" if len(samples) > limit else "")
        lines.append(f"  batch {seq} ({where}): samples [{shown}]")
    return "\n".join(lines) if lines else "  (no batch job in flight)"
