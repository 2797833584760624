"""How long the calling thread has waited for a CPU, from Linux's scheduler statistics.

A thread worker's wall time on a job is time on a CPU, time waiting for a CPU (it
could run, but every core was taken) and time waiting on something else (a file,
the network, a lock). ``time.thread_time()`` gives the first; the kernel's
``/proc/thread-self/schedstat`` gives the second, so that the thread count under
``num_workers="auto"`` can tell "waiting on I/O: more threads help" from "waiting
for a CPU: too many threads" (see :mod:`stoker._sizing`).
"""

from __future__ import annotations

import os

__all__ = ["CpuWaitClock", "cpu_wait_seconds"]

_PATH = "/proc/thread-self/schedstat"


def _readable() -> bool:
    try:
        with open(_PATH, "rb") as f:
            fields = f.read().split()
        return len(fields) >= 2 and fields[1].isdigit()
    except OSError:
        return False


_AVAILABLE = _readable()


def cpu_wait_seconds() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU, since it
    started; always 0.0 where the system does not say (not Linux, no schedstats).

    Example:
        >>> cpu_wait_seconds() >= 0.0
        True
    """
    if not _AVAILABLE:
        return 0.0
    try:
        with open(_PATH, "rb") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, ValueError, IndexError):
        return 0.0


class CpuWaitClock:
    """The time one thread has waited for a CPU, read through a file it keeps open.

    Reading through a kept file is one system call (``pread``), where opening the
    file each time is several, each a release and re-acquisition of the GIL: with a
    hundred threads taking turns at the GIL, that made every job measurably slower.
    Build it on the thread it measures (the file names the thread that opens it).

    Example:
        >>> clock = CpuWaitClock()
        >>> clock.seconds() >= 0.0
        True
        >>> clock.close()

    Resources:
        Owns one file descriptor (where the system has schedstats); :meth:`close`
        (idempotent) closes it. The thread worker that builds it closes it as it ends.
    """

    def __init__(self) -> None:
        self._fd = -1
        if _AVAILABLE:
            try:
                self._fd = os.open(_PATH, os.O_RDONLY)
            except OSError:
                self._fd = -1

    def seconds(self) -> float:
        """Seconds the thread that built this clock has waited for a CPU since it
        started (0.0 where the system does not say)."""
        if self._fd < 0:
            return 0.0
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) * 1e-9
        except (OSError, ValueError, IndexError):
            return 0.0

    def close(self) -> None:
        """Close the file (idempotent)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
