"""``Watchdog``: when no batch comes for a while, say what the loader is stuck on.

With the default ``timeout=None`` a record that never finishes would hang the loop
silently. The watchdog does not raise (``timeout`` does that): an iterator's
``next()`` calls :meth:`Watchdog.begin` and :meth:`Watchdog.end` around its wait, and
one thread of stoker's, ``stoker-watchdog``, looks at every watched iterator of the
process. The first time a ``next()`` has lasted ``seconds``, it logs one warning
(logger ``"stoker"``) naming the batches and samples in flight and the Python stacks
reading them (worker threads or processes, the prefetch thread, or the caller's own
thread when it builds the batch itself: ``num_workers=0``), and keeps the same text
for ``it.stats().watchdog``. It watches from outside the loop, so every plan (maps,
filters, ``pack``, ``on_error="skip"``, streams) and every executor is watched the
same way, in one place.

``LoaderTimeout`` names the same batches and samples (:func:`timed_out`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from .errors import LoaderTimeout

__all__ = ["Watchdog", "describe_jobs", "thread_stack", "timed_out"]

log = logging.getLogger("stoker")

_SLICES = 4
"""The watcher looks this many times per ``seconds``: a stall is reported between
``seconds`` and ``1.25 * seconds`` after ``next()`` began."""


def thread_stack(thread: threading.Thread | int | None) -> str:
    """The Python stack of a running thread (or thread id), most recent call last."""
    ident = thread.ident if isinstance(thread, threading.Thread) else thread
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return "    (not running)\n"
    return "".join(traceback.format_stack(frame))


class Named(Protocol):
    """A job as the reports name it (``stoker._epoch.jobs.Job`` is one)."""

    @property
    def where(self) -> str: ...

    def samples(self) -> list[int]: ...


def describe_jobs(jobs: Iterable[Named], limit: int = 16) -> str:
    """Lines naming the jobs in flight: the batch (or chunk, or stream part) and its
    sample indices.

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> from stoker._epoch.jobs import Job
        >>> job = Job(3, "build", ((Context(), np.array([12, 13])),), "batch 3 of epoch 0")
        >>> print(describe_jobs([job]))
          batch 3 of epoch 0: samples [12, 13]
    """
    lines = []
    for job in jobs:
        samples = job.samples()
        shown = ", ".join(map(str, samples[:limit])) + (", …" if len(samples) > limit else "")
        named = f": samples [{shown}]" if samples else ""
        lines.append(f"  {job.where}{named}")
    return "\n".join(lines) if lines else "  (no job in flight)"


def timed_out(error: LoaderTimeout, in_flight: str) -> LoaderTimeout:
    """``error`` (a wait that ran out) with the batches and samples in flight named.

    Example:
        >>> str(timed_out(LoaderTimeout("no batch within 2 s"), "  batch 3: samples [7]"))
        'no batch within 2 s; in flight:\\n  batch 3: samples [7]'
    """
    return LoaderTimeout(f"{error}; in flight:\n{in_flight}")


class Watchdog:
    """Watches the ``next()`` calls of one iterator (see the module docstring).

    ``describe(caller)`` says what is in flight and where; ``caller`` is the id of
    the thread inside ``next()``.

    Example:
        >>> w = Watchdog(30.0, lambda caller: "batch 3")
        >>> w.begin(); w.end(); w.findings
        >>> w.close()

    Resources:
        While a ``next()`` of a watched iterator runs, and for a second after, the
        process's ``stoker-watchdog`` daemon thread runs (one for every watchdog); it
        ends by itself when no ``next()`` ran for :data:`_GRACE` seconds, and the
        next :meth:`begin` starts it again.
    """

    def __init__(self, seconds: float, describe: Callable[[int | None], str]) -> None:
        self.seconds = seconds
        self._describe = describe
        self._since = time.monotonic()
        self._caller: int | None = None
        self._active = False
        self._reported = False
        self._arrived = False  # how the last next() ended: with a batch, or raising
        self.findings: str | None = None
        _WATCHER.add(self)

    def begin(self) -> None:
        """``next()`` starts waiting for a batch (on this thread)."""
        self._caller = threading.get_ident()
        self._reported = False
        self._arrived = False
        self._since = time.monotonic()
        self._active = True
        if _WATCHER._thread is None:  # (read without the lock: running() looks again)
            _WATCHER.running()

    def end(self, arrived: bool = True) -> None:
        """``next()`` returned a batch (``arrived``), or raised."""
        self._arrived = arrived
        self._active = False
        self._since = time.monotonic()

    @property
    def waiting(self) -> bool:
        """True while a ``next()`` runs."""
        return self._active

    def recent(self, now: float) -> bool:
        """True while a ``next()`` runs or ran less than :data:`_GRACE` seconds ago."""
        return self._active or now - self._since < _GRACE

    def close(self) -> None:
        """Stop watching (idempotent)."""
        self._active = False
        _WATCHER.discard(self)

    def check(self, now: float) -> float:
        """Report once if the current ``next()`` has lasted ``seconds``; the time
        until it should look again (called by the watcher thread)."""
        if not self._active or self._reported:
            return self.seconds / _SLICES
        waited = now - self._since
        if waited < self.seconds:
            return min(self.seconds - waited, self.seconds / _SLICES)
        self._reported = True
        try:
            found = self._describe(self._caller)
        except Exception as exc:  # a report must never break the loader
            found = f"(could not describe the work in flight: {type(exc).__name__}: {exc})"
        if not self.waiting and self._arrived:  # the batch came while it was written
            return self.seconds / _SLICES
        text = (
            f"no batch for {waited:.1f} s (watchdog={self.seconds:g}); in flight:\n{found}\n"
            "a record may be stuck (the stacks show where); pass timeout= to raise "
            "LoaderTimeout instead, or watchdog=None to silence this"
        )
        log.warning("stoker: %s", text)
        self.findings = text  # after: it.stats() shows only what was logged
        return self.seconds / _SLICES


_GRACE = 1.0
"""Seconds the watcher thread stays after the last ``next()`` of every watchdog ended."""


class _Watcher:
    """The process's one watcher thread and the watchdogs it looks at."""

    def __init__(self) -> None:
        # Reentrant: collecting garbage may close an iterator's watchdog (discard)
        # on the thread that holds the lock.
        self._lock = threading.RLock()
        self._watched: weakref.WeakSet[Watchdog] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        # Wakes the thread's nap when the last watchdog goes, so that it ends at once
        # (a pipe: writing to it takes no lock a finalizer could find held).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def add(self, watchdog: Watchdog) -> None:
        with self._lock:
            self._watched.add(watchdog)

    def discard(self, watchdog: Watchdog) -> None:
        # Without the lock: iterators' finalizers call it from whatever thread collects
        # garbage, a thread being started by running() included, which must not wait
        # for the lock its starter holds (the watcher reads a snapshot of the set).
        self._watched.discard(watchdog)
        if not self._watched:
            with contextlib.suppress(OSError):  # full: a wake-up is pending already
                os.write(self._wake_w, b"\0")

    def running(self) -> None:
        """Start the thread unless it runs (a watchdog's ``begin`` set it active first:
        the thread re-reads that after it let go of its place, so none is missed)."""
        # Read without the lock first (once a batch): the thread looks at the
        # watchdogs once more after it let go of its place (_run), so it sees this
        # watchdog active or this call sees the place free.
        started = self._thread
        if started is not None:
            return
        with self._lock:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name="stoker-watchdog", daemon=True)
            self._thread = thread
        # Started outside the lock: a new thread may collect garbage as it starts, and
        # a finalizer run there may close a watchdog.
        thread.start()

    def _busy(self, now: float) -> bool:
        return any(w.recent(now) for w in list(self._watched))

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            now = time.monotonic()
            watched = list(self._watched)
            naps = [w.check(now) for w in watched]
            del watched
            with self._lock:
                if not self._busy(time.monotonic()):
                    self._thread = None  # first let go, then look once more
                    if not self._busy(time.monotonic()):
                        return
                    self._thread = me
            nap = min(max(min(naps, default=_GRACE), 0.01), _GRACE)
            select.select([self._wake_r], [], [], nap)
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 4096)


_WATCHER = _Watcher()


def _forget_in_child() -> None:
    """After ``os.fork()``: the parent's watcher thread does not run here."""
    for fd in (_WATCHER._wake_r, _WATCHER._wake_w):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WATCHER.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_forget_in_child)
