"""How much of a thread's CPU time went to the kernel, and how many page faults it took.

A pipeline that allocates and frees large arrays (decoded images, crops, collated
batches) gets fresh pages from the kernel for every record when glibc hands freed
memory back (``munmap``, or trimming a heap): each page is then a fault, zeroed by
the kernel, and the thread's CPU time goes to system time. The kernel counts both
for every thread (``getrusage(RUSAGE_THREAD)``), so the verdict can tell "the workers
are busy decoding" from "the workers are busy taking back memory they just gave
away" (see :mod:`stoker._exec.malloc` and ``DataLoader(tune_allocator=True)``).
"""

from __future__ import annotations

try:
    import resource
except ImportError:  # not a Unix
    resource = None  # type: ignore[assignment]

__all__ = ["KernelUsage"]

_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)  # Linux only


class KernelUsage:
    """The system time and minor page faults of the thread that calls :meth:`since`,
    counted from that thread's previous call.

    One ``getrusage`` call a job: the first call on a thread counts from the thread's
    start, each later one from the call before, so the time a worker waited between
    two jobs counts with the next (a wait for a queue takes little system time and no
    faults). Everything is 0 where the system does not count per thread (not Linux).

    Example:
        >>> usage = KernelUsage()
        >>> system_seconds, faults = usage.since()
        >>> system_seconds >= 0.0 and faults >= 0
        True
    """

    __slots__ = ("_faults", "_system")

    def __init__(self) -> None:
        self._system = 0.0
        self._faults = 0

    def since(self) -> tuple[float, int]:
        """Seconds of system time and minor page faults since the last call."""
        if _THREAD is None:
            return 0.0, 0
        used = resource.getrusage(_THREAD)
        system, faults = used.ru_stime, used.ru_minflt
        got = (max(0.0, system - self._system), max(0, faults - self._faults))
        self._system, self._faults = system, faults
        return got
