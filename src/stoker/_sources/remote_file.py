"""``RangeFile``: a remote object as a seekable file whose reads are ranged requests.

pyarrow reads a Parquet file through a Python file object: the footer first (the
last few kilobytes), then only the column chunks of the row groups asked for. Over
fsspec's own file objects each read may fetch a whole cache block (5 MiB by default)
or more; here a read asks the store for its bytes and no more, through
:meth:`Remote.read_range` (which retries under the dataset's ``RetryPolicy`` and
bounds the requests in flight). A small buffer in front of it (``block_size``) joins
the many small reads of a footer or a tar header into one request.
"""

from __future__ import annotations

import io
from typing import IO, Protocol, cast

from .._tally import RemoteTally

__all__ = ["RangeFile", "RangeReader"]


class RangeReader(Protocol):
    """What reads the ranges (a :class:`~stoker._sources.remote.Remote`)."""

    def read_range(self, url: str, start: int, end: int, tally: RemoteTally) -> bytes:
        """Bytes ``[start, end)`` of ``url``."""
        ...


class RangeFile(io.RawIOBase):
    """Bytes of the remote object ``url`` (of ``size`` bytes), read by range.

    Example:
        >>> import fsspec
        >>> from stoker._sources.remote import Remote
        >>> fsspec.filesystem("memory").pipe("/doc/r.bin", b"0123456789")
        >>> f = RangeFile.buffered(Remote("memory://", {}), "memory://doc/r.bin", 10,
        ...                        RemoteTally(), block_size=4)
        >>> _ = f.seek(6); f.read(3)
        b'678'

    Resources:
        None of its own: requests go through the ``Remote``'s file system.
    """

    def __init__(self, remote: RangeReader, url: str, size: int, tally: RemoteTally) -> None:
        super().__init__()
        self._remote = remote
        self._url = url
        self._size = size
        self._tally = tally
        self._pos = 0

    @classmethod
    def buffered(
        cls, remote: RangeReader, url: str, size: int, tally: RemoteTally, block_size: int
    ) -> IO[bytes]:
        """A buffered reader over a new ``RangeFile`` (reads of at least ``block_size``)."""
        return cast("IO[bytes]", io.BufferedReader(cls(remote, url, size, tally), block_size))

    @property
    def name(self) -> str:
        """The URL."""
        return self._url

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset} in {self._url!r}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        end = min(self._size, self._pos + len(buffer))
        if end <= self._pos:
            return 0
        data = self._remote.read_range(self._url, self._pos, end, self._tally)
        memoryview(buffer)[: len(data)] = data
        self._pos += len(data)
        return len(data)
