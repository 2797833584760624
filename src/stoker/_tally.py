"""``RemoteTally``: what the remote reads of one thread did, for ``it.stats()``."""

from __future__ import annotations

import threading

__all__ = ["TALLIES", "RemoteTally", "remote_tally"]


class RemoteTally:
    """What remote reads did for one thread: requests sent, retries, truncated bodies
    read again, bytes received and seconds waited between tries.

    A reader takes its thread's tally (:func:`remote_tally`) when it starts; the
    threads that serve it (fsspec's event loop, pyarrow's readers) add to that tally,
    so the counts land with the thread whose fetch is measured.

    Example:
        >>> tally = RemoteTally(); tally.add(requests=2, retries=1)
        >>> tally.requests, tally.retries
        (2, 1)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = self.retries = self.truncated = self.nbytes = 0
        self.backoff_seconds = 0.0

    def add(
        self,
        requests: int = 0,
        retries: int = 0,
        truncated: int = 0,
        nbytes: int = 0,
        backoff_seconds: float = 0.0,
    ) -> None:
        """Add counts (from any thread)."""
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.truncated += truncated
            self.nbytes += nbytes
            self.backoff_seconds += backoff_seconds

    def counts(self) -> tuple[int, int, int, int, float]:
        """(requests, retries, truncated, bytes, back-off seconds), read together."""
        with self._lock:
            return (self.requests, self.retries, self.truncated, self.nbytes, self.backoff_seconds)


class _Local(threading.local):
    # A class default: reading it on a thread that has none raises nothing (read
    # around every batch, where a getattr default would cost an AttributeError).
    tally: RemoteTally | None = None


TALLIES = _Local()
"""This thread's tally as ``TALLIES.tally`` (None before its first remote read)."""


def remote_tally() -> RemoteTally:
    """This thread's :class:`RemoteTally` (created on first use)."""
    tally = TALLIES.tally
    if tally is None:
        tally = TALLIES.tally = RemoteTally()
    return tally
