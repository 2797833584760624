"""``Segment``: anonymous shared memory that no exit path can leak.

A segment is a Linux ``memfd``: memory with no name in any file system, freed by the
kernel when the last file descriptor and the last mapping are gone. The owner (the
main process) creates it and keeps its descriptor; another process attaches by
opening ``/proc/<owner pid>/fd/<fd>`` and mapping it, which works only while the
owner keeps that descriptor open (once closed, the number is soon reused for another
file). A segment that changes hands instead (a worker's batch) travels as a
descriptor over the connection (:func:`send_with_segment`): the receiver gets a
descriptor of its own with the message, whatever the sender does next.

Nothing is left in ``/dev/shm`` when a worker or the parent is killed with SIGKILL:
the memory dies with the last process that maps it (or holds a descriptor of it, one
in flight in a socket included). In ``/proc/<pid>/fd`` and ``/proc/<pid>/maps`` a
segment shows as ``/memfd:stoker-<purpose> (deleted)``, which tells it apart from
other programs' memory.

Where memfd or ``/proc`` is missing (not Linux), :func:`sharing_available` is False
and callers fall back to copying.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = [
    "PREFIX",
    "Segment",
    "SegmentHandle",
    "attach",
    "is_sharing",
    "receive_with_segment",
    "send_with_segment",
    "sharing_available",
    "sharing_for_workers",
]

PREFIX = "stoker-"
"""Every segment's memfd name starts with this."""

_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14 and later

_available: bool | None = None


def sharing_available() -> bool:
    """True where segments work: ``os.memfd_create`` and ``/proc/<pid>/fd`` exist."""
    global _available
    if _available is None:
        _available = hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd")
    return _available


@dataclass(frozen=True, slots=True)
class SegmentHandle:
    """What another process needs to attach a segment (it pickles to three ints)."""

    pid: int
    fd: int
    size: int


class Segment:
    """``size`` bytes of anonymous shared memory, mapped in this process.

    Example:
        >>> seg = Segment(4096, "doctest")
        >>> seg.array[:3] = [1, 2, 3]
        >>> bytes(attach(seg.handle).array[:3])
        b'\\x01\\x02\\x03'
        >>> seg.close()

    Resources:
        The creating process owns the descriptor, which lets other processes attach;
        :meth:`close` (idempotent) releases it and this process's reference to the
        mapping. The memory itself is freed once no process maps it any more, so
        NumPy views handed out earlier stay valid after :meth:`close`. Python's
        ``mmap`` keeps a duplicate descriptor of its own for as long as the mapping
        lives (until the last view is gone), so a live segment costs one descriptor
        per process that maps it, two in its owner before :meth:`close`.
    """

    def __init__(self, size: int, purpose: str, *, _fd: int | None = None) -> None:
        if size < 1:
            raise ValueError(f"a segment needs at least one byte, got size={size}")
        self.size = size
        self.purpose = purpose
        owner = _fd is None
        fd = os.memfd_create(PREFIX + purpose, os.MFD_CLOEXEC) if _fd is None else _fd
        try:
            if owner:
                os.ftruncate(fd, size)
            self._mmap: mmap.mmap | None = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        if owner:
            self._fd: int | None = fd
        else:  # an attached segment needs no descriptor once it is mapped
            os.close(fd)
            self._fd = None
        self.array: np.ndarray = np.frombuffer(self._mmap, dtype=np.uint8)
        self._pid = os.getpid()

    @property
    def handle(self) -> SegmentHandle:
        """How another process attaches this segment (only while the owner has it open)."""
        if self._fd is None:
            if self._mmap is None:
                raise RuntimeError("the segment is closed: it cannot be shared any more")
            raise RuntimeError("only the process that created a segment can share it")
        return SegmentHandle(self._pid, self._fd, self.size)

    def populate(self, start: int, stop: int) -> None:
        """Allocate the pages of bytes ``start:stop`` now, in one call, rather than one
        fault per page as they are first written (about a fifth cheaper for a fresh
        segment). A kernel without ``MADV_POPULATE_WRITE`` (before Linux 5.14) leaves
        them to the faults."""
        if self._mmap is None or stop <= start:
            return
        first = start - start % mmap.PAGESIZE
        with contextlib.suppress(OSError, ValueError):
            self._mmap.madvise(_MADV_POPULATE_WRITE, first, min(stop, self.size) - first)

    @property
    def closed(self) -> bool:
        return self._mmap is None

    def close(self) -> None:
        """Drop the descriptor and this object's mapping reference (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        self._mmap = None  # the mapping goes when the last view of ``array`` does

    def __repr__(self) -> str:
        return f"Segment({self.purpose!r}, size={self.size})"


def attach(handle: SegmentHandle) -> Segment:
    """Map a segment created by another (living) process.

    The caller must know that the owner still holds the segment open: once the owner
    closed it, the descriptor number may name another file. A segment handed over
    for good travels with :func:`send_with_segment` instead.

    Errors:
        OSError: the owner has exited or closed the segment.
    """
    fd = os.open(f"/proc/{handle.pid}/fd/{handle.fd}", os.O_RDWR | os.O_CLOEXEC)
    return Segment(handle.size, "attached", _fd=fd)


_SEGMENT_FOLLOWS = b"stoker: a segment's descriptor follows"
"""Sent just before a passed descriptor; no pickle starts like this."""


def send_with_segment(conn: Connection, data: bytes, segment: Segment | None = None) -> None:
    """Send the message ``data`` over ``conn``, with ``segment`` (if any) passed along.

    ``conn`` must be a Unix socket connection (a duplex ``multiprocessing.Pipe``).
    The segment's descriptor goes first, as ``SCM_RIGHTS`` ancillary data: the
    receiver's copy keeps the memory alive, so the sender may close the segment as
    soon as this returns.

    Example:
        >>> import multiprocessing
        >>> a, b = multiprocessing.Pipe()
        >>> seg = Segment(4096, "doctest")
        >>> seg.array[:2] = [5, 6]
        >>> send_with_segment(a, b"message", seg)
        >>> seg.close()
        >>> data, passed = receive_with_segment(b)
        >>> data, passed.array[:2].tolist()
        (b'message', [5, 6])
        >>> passed.close(); a.close(); b.close()

    Errors:
        OSError: the connection is closed or broken.
        RuntimeError: ``segment`` is closed or was not created by this process.
    """
    if segment is not None:
        fd = segment.handle.fd  # raises for a closed or attached segment
        conn.send_bytes(_SEGMENT_FOLLOWS)
        sock = socket.socket(fileno=conn.fileno())
        try:
            socket.send_fds(sock, [b"\0"], [fd])
        finally:
            sock.detach()  # the descriptor stays the connection's
    conn.send_bytes(data)


def receive_with_segment(conn: Connection) -> tuple[bytes, Segment | None]:
    """The next message from :func:`send_with_segment`, and the segment passed with it.

    The segment is mapped in this process and owns nothing else: :meth:`Segment.close`
    (or dropping it) is all the cleaning up it needs.

    Errors:
        EOFError: the sender closed the connection or died, before or during the
            message (a segment passed without its message is released).
        OSError: the connection is broken, or the segment cannot be mapped.
    """
    data = conn.recv_bytes()
    if data != _SEGMENT_FOLLOWS:
        return data, None
    sock = socket.socket(fileno=conn.fileno())
    try:
        byte, fds, _, _ = socket.recv_fds(sock, 1, 1, socket.MSG_CMSG_CLOEXEC)
    finally:
        sock.detach()
    if not fds:
        if not byte:
            raise EOFError("the connection ended before a passed segment's descriptor")
        raise OSError("a passed segment's descriptor did not arrive with it")
    try:
        size = os.fstat(fds[0]).st_size
    except BaseException:
        os.close(fds[0])
        raise
    segment = Segment(size, "passed", _fd=fds[0])  # maps it and closes the descriptor
    try:
        return conn.recv_bytes(), segment
    except BaseException:
        segment.close()
        raise


_sharing = threading.local()


@contextlib.contextmanager
def sharing_for_workers() -> Iterator[None]:
    """While active, in-memory sources pickle their data as shared segments.

    The loader wraps the one pickling of the pipeline that goes to its process
    workers in it; any other pickling (``pickle.dumps(it)``, a user saving a
    dataset) copies the data as usual.
    """
    depth = getattr(_sharing, "depth", 0)
    _sharing.depth = depth + 1
    try:
        yield
    finally:
        _sharing.depth = depth


def is_sharing() -> bool:
    """True inside :func:`sharing_for_workers` on a platform where segments work."""
    return getattr(_sharing, "depth", 0) > 0 and sharing_available()
