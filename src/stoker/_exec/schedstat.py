"""How long the calling thread has waited for a CPU, from Linux's scheduler statistics.

A thread worker's wall time on a job is time on a CPU, time waiting for a CPU (it
could run, but every core was taken) and time waiting on something else (a file,
the network, a lock). ``time.thread_time()`` gives the first; the kernel's
``/proc/thread-self/schedstat`` gives the second, so that the thread count under
``num_workers="auto"`` can tell "waiting on I/O: more threads help" from "waiting
for a CPU: too many threads" (see :mod:`stoker._sizing`).
"""

from __future__ import annotations

__all__ = ["cpu_wait_seconds"]

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
