"""``keep_large_blocks``: make glibc reuse large freed blocks instead of unmapping them.

A decoded image, an augmented array or a collated batch is a large allocation. By
default glibc serves each one with a fresh ``mmap`` and returns it with ``munmap``
when it is freed (or trims the heap), so every record pays for page faults on
memory it just had. Raising the mmap and trim thresholds keeps those blocks in the
heap for reuse: on a JPEG decode-and-augment pipeline this doubles what one core
does. Worker processes always call it (they are stoker's); in the main process,
the user's, thread workers call it only under ``DataLoader(tune_allocator=True)``:
a library changes the host process only when asked. The price is that up to the
trim threshold of freed memory stays with the process instead of going back to the
system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_large_blocks", "large_blocks_kept"]

MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_done = False
_lock = threading.Lock()


def keep_large_blocks() -> bool:
    """Set glibc's thresholds once per process; False where there is no glibc ``mallopt``.

    Example:
        >>> callable(keep_large_blocks)  # calling it changes this process's allocator
        True
    """
    global _done
    with _lock:
        if _done:
            return True
        name = ctypes.util.find_library("c")
        if name is None:
            return False
        try:
            mallopt = ctypes.CDLL(name).mallopt
        except (OSError, AttributeError):  # not glibc (musl, macOS)
            return False
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        _done = True
        return True


def large_blocks_kept() -> bool:
    """True once :func:`keep_large_blocks` raised this process's thresholds.

    Example:
        >>> isinstance(large_blocks_kept(), bool)
        True
    """
    return _done
