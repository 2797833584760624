"""Files behind fsspec URLs (``s3://``, ``gs://``, ``http(s)://``, ``memory://``, ...).

``from_files`` and ``from_image_folder`` hand URLs here (``pip install
'stoker[remote]'``: fsspec, plus the protocol's own package such as ``s3fs``). A
:class:`Remote` is a description (the protocol and its storage options): the file
system object is opened lazily in each worker and left out of a pickle.

Listing goes through the file system: a glob through ``fs.glob``, a folder through
``fs.find``. HTTP has no listing in general, so HTTP(S) takes explicit lists of URLs
(a folder URL works only when the server returns an HTML index, as Python's
``http.server`` does). Object stores have no symbolic links, so the link rules of
local listing do not arise.

Reads of one batch are issued together: on an asynchronous file system (HTTP, S3,
GCS, Azure) every file of the batch is requested at once on fsspec's own event-loop
thread (one kept-alive connection pool per process), on a synchronous one they are
read one after another. ``concurrency`` bounds the requests in flight in a process,
across every batch its workers are reading: with two workers the next batch's reads
take each slot the moment the last batch frees it, so ``concurrency`` requests stay
in flight without a gap between batches, and latency, not the number of workers,
bounds throughput.

Every request is retried under the dataset's :class:`~stoker.RetryPolicy` when the
store throttles (HTTP 429, 503), fails (5xx), resets the connection, times out or
sends fewer bytes than the object or range asked for; a read whose budget runs out
raises :class:`~stoker.RemoteReadError`, naming the URL and the tries. A request
holds its ``concurrency`` slot only while it is in flight, not while it waits to be
tried again. What the requests did (sent, retried, truncated, bytes) is counted for
``it.stats()`` on the thread whose read they serve.

Files that are read in parts (Parquet footers and row groups, tar shards) are opened
with :meth:`Remote.open_file`: a seekable file whose reads are ranged requests
(``remote_file.py``), so a row group costs the bytes of its column chunks, not the
object.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import IO, Any

from .._tally import RemoteTally, remote_tally
from ..errors import ConfigError, RemoteReadError
from .extras import require
from .listing import is_glob
from .remote_file import RangeFile
from .retry import Attempts, RetryPolicy, classify

__all__ = ["DEFAULT_CONCURRENCY", "Remote", "is_url"]

DEFAULT_CONCURRENCY = 64

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: object) -> bool:
    """True for an fsspec URL (``protocol://...``) other than a plain ``file://`` path.

    Example:
        >>> is_url("s3://bucket/a.jpg"), is_url("data/a.jpg"), is_url("file:///tmp/a")
        (True, False, False)
    """
    return isinstance(path, str) and bool(_URL.match(path)) and not path.startswith("file://")


def _clip(data: bytes, start: int | None, end: int | None) -> bytes:
    """The range asked for, when a server ignored the Range header and sent the object."""
    if start is None or end is None or len(data) <= end - start:
        return data
    return data[start:end]


def _hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.rstrip("/").split("/")[-1:])


class Remote:
    """A file system named by URL, opened lazily (once per process).

    Example:
        >>> import fsspec
        >>> fs = fsspec.filesystem("memory"); fs.pipe("/doc/a.txt", b"hi")
        >>> remote = Remote("memory://doc", {})
        >>> remote.read_many(["memory://doc/a.txt"])
        [b'hi']
        >>> remote.open_file("memory://doc/a.txt").read()
        b'hi'

    Resources:
        The file system object (and, for HTTP, its connection pool on fsspec's
        event-loop thread, which fsspec owns) is opened on first use in each process
        and left out of a pickle, as is the semaphore that bounds the reads in
        flight (one per process and event loop, shared by every batch).

    Errors:
        RemoteReadError: a read that failed on every try ``retry`` allowed.
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any],
        concurrency: int = DEFAULT_CONCURRENCY,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.protocol = url.split("://", 1)[0]
        self.storage_options = dict(storage_options)
        self.concurrency = concurrency
        self.retry = retry if retry is not None else RetryPolicy()
        self._sizes: dict[str, int] = {}  # found when the dataset was built: carried along
        self._fs: Any = None
        self._slots: tuple[Any, asyncio.Semaphore] | None = None

    @property
    def fs(self) -> Any:
        """The fsspec file system (opened on first use)."""
        if self._fs is None:
            fsspec = require("fsspec", "remote")
            try:
                self._fs = fsspec.filesystem(self.protocol, **self.storage_options)
            except (ImportError, ValueError) as exc:
                raise ConfigError(
                    f"cannot open {self.protocol}:// with fsspec ({exc}); install the "
                    f"package for this protocol (pip install 'stoker[remote]' and, e.g., "
                    "s3fs or gcsfs)"
                ) from exc
        return self._fs

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fs": None, "_slots": None}

    def _limit(self, loop: Any) -> asyncio.Semaphore:
        """The semaphore of ``loop`` (called on that loop's thread only, so no race)."""
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.concurrency))
        return self._slots[1]

    def url(self, path: str) -> str:
        """``path`` as a full URL with its protocol."""
        return path if "://" in path else f"{self.protocol}://{path.lstrip('/')}"

    def _found(self, paths: Sequence[str]) -> list[str]:
        fs = self.fs
        out = []
        for p in sorted(paths):
            if _hidden(p):
                continue
            if self.protocol not in ("http", "https") and fs.isdir(p):
                continue
            out.append(self.url(p))
        return out

    def list_files(self, items: Sequence[str]) -> list[str]:
        """The file URLs that ``items`` (URLs, globs or folders) name.

        Errors:
            ConfigError: a glob that matches nothing, a folder with no file, a missing
                file, a glob over HTTP.
        """
        fs = self.fs
        found: list[str] = []
        for item in items:
            if not is_url(item) or item.split("://", 1)[0] != self.protocol:
                raise ConfigError(
                    f"{item!r} is not a {self.protocol}:// URL: read files of one file "
                    "system together (concat two datasets for two)"
                )
            if self.protocol in ("http", "https"):
                if is_glob(item.split("?", 1)[0]):
                    raise ConfigError(
                        f"cannot glob over HTTP ({item!r}): pass the list of file URLs"
                    )
                if item.endswith("/"):
                    files = self._found(fs.find(item))
                    if not files:
                        raise ConfigError(f"the folder {item!r} lists no file")
                    found += files
                else:
                    found.append(item)  # checked when read: one request per file is too slow
                continue
            path = fs._strip_protocol(item)
            if is_glob(path):
                files = self._found(fs.glob(path))
                if not files:
                    raise ConfigError(f"the pattern {item!r} matches no file (check the URL)")
            elif fs.isdir(path):
                files = self._found(fs.find(path))
                if not files:
                    raise ConfigError(f"the folder {item!r} holds no file")
            elif fs.isfile(path):
                files = [self.url(path)]
            else:
                raise ConfigError(f"no such file or folder: {item!r}")
            found += files
        return found

    def folders(self, url: str) -> list[str]:
        """The names of the sub-folders of the folder ``url``, sorted (hidden ones left out).

        Errors:
            ConfigError: ``url`` is not a folder.
        """
        fs = self.fs
        try:
            entries = fs.ls(
                url if self.protocol in ("http", "https") else fs._strip_protocol(url), detail=True
            )
        except FileNotFoundError as exc:
            raise ConfigError(f"no such folder: {url!r}") from exc
        names = sorted(
            e["name"].rstrip("/").rsplit("/", 1)[-1]
            for e in entries
            if e.get("type") == "directory"
        )
        return [n for n in names if not n.startswith(".")]

    def _async(self) -> bool:
        return bool(getattr(self.fs, "async_impl", False))

    async def _fetch(
        self, url: str, start: int | None, end: int | None, tally: RemoteTally
    ) -> bytes:
        """One read (the object, or ``[start, end)``), tried until it succeeds or the
        budget is spent; holds a ``concurrency`` slot only while a request is in flight."""
        fs, policy = self.fs, self.retry
        limit = self._limit(fs.loop)
        tries = Attempts(url, policy, tally)
        expected = end - start if start is not None and end is not None else self._sizes.get(url)
        while True:
            try:
                async with limit:
                    tries.begin()
                    call = fs._cat_file(url, start=start, end=end)
                    data = await asyncio.wait_for(call, policy.timeout)
                return tries.done(_clip(bytes(data), start, end), expected)
            except Exception as exc:  # tries.failed re-raises what is not retried
                wait = tries.failed(exc)
            await asyncio.sleep(wait)

    def _fetch_sync(
        self, url: str, start: int | None, end: int | None, tally: RemoteTally
    ) -> bytes:
        """:meth:`_fetch` on a synchronous file system (no per-request timeout)."""
        tries = Attempts(url, self.retry, tally)
        expected = end - start if start is not None and end is not None else self._sizes.get(url)
        while True:
            try:
                tries.begin()
                data = self.fs.cat_file(url, start=start, end=end)
                return tries.done(_clip(bytes(data), start, end), expected)
            except Exception as exc:  # tries.failed re-raises what is not retried
                wait = tries.failed(exc)
            time.sleep(wait)

    def read_range(self, url: str, start: int, end: int, tally: RemoteTally) -> bytes:
        """Bytes ``[start, end)`` of ``url`` (``end`` within the object), with retries.

        Errors:
            RemoteReadError: the budget ran out.
        """
        if end <= start:
            return b""
        if self._async():
            sync = require("fsspec.asyn", "remote").sync
            data: bytes = sync(self.fs.loop, self._fetch, url, start, end, tally)
            return data
        return self._fetch_sync(url, start, end, tally)

    def size(self, url: str) -> int:
        """The size of the object at ``url`` in bytes (asked once per process, with
        retries; sizes found when the dataset was built travel with it).

        Errors:
            FileNotFoundError: no such object.
            RemoteReadError: the budget ran out.
        """
        known = self._sizes.get(url)
        if known is None:
            known = self._sizes[url] = int(self.info(url)["size"])
        return known

    def info(self, url: str) -> dict[str, Any]:
        """fsspec's ``info`` of ``url``, with retries; notes its size for the workers.

        Errors:
            FileNotFoundError: no such object.
            RemoteReadError: the budget ran out.
        """
        tries = Attempts(url, self.retry, remote_tally())
        while True:
            try:
                tries.begin()
                info: dict[str, Any] = self.fs.info(url)
                break
            except FileNotFoundError as exc:
                # fsspec's HTTP info reports any failed request as a missing file.
                if exc.__cause__ is None or classify(exc.__cause__) is None:
                    raise
                wait = tries.failed(exc.__cause__)
            except Exception as exc:  # tries.failed re-raises what is not retried
                wait = tries.failed(exc)
            time.sleep(wait)
        if info.get("size") is not None:
            self._sizes[url] = int(info["size"])
        return info

    def open_file(self, url: str, block_size: int = 64 << 10) -> IO[bytes]:
        """``url`` as a seekable binary file read by ranged requests (with retries).

        Reads go through the file in blocks of at least ``block_size`` bytes; a read
        larger than that (a Parquet column chunk) is one request of just its bytes.

        Errors:
            FileNotFoundError: no such object.
            RemoteReadError: a read whose budget ran out.
        """
        return RangeFile.buffered(self, url, self.size(url), remote_tally(), block_size)

    def read_many(self, urls: Sequence[str]) -> list[bytes]:
        """The bytes of every file, in order, read concurrently where the file system can.

        Errors:
            FileNotFoundError: a file that no longer exists (naming its URL).
            RemoteReadError: a file whose retry budget ran out (naming its URL).
            OSError: any other failed read, naming the URL.
        """
        tally = remote_tally()
        results: list[Any]
        if self._async():
            sync = require("fsspec.asyn", "remote").sync

            async def gather() -> list[Any]:
                reads = (self._fetch(u, None, None, tally) for u in urls)
                return await asyncio.gather(*reads, return_exceptions=True)

            results = sync(self.fs.loop, gather)
        else:
            results = []
            for url in urls:
                try:
                    results.append(self._fetch_sync(url, None, None, tally))
                except Exception as exc:  # reported below, with the URL
                    results.append(exc)
        out: list[bytes] = []
        for url, result in zip(urls, results, strict=True):
            if isinstance(result, FileNotFoundError):
                raise FileNotFoundError(
                    2, f"{url!r} does not exist (removed after the dataset was built?)"
                ) from result
            if isinstance(result, RemoteReadError):
                raise result  # it names the URL and the tries already
            if isinstance(result, BaseException):
                raise OSError(
                    f"reading {url!r} failed: {type(result).__name__}: {result}"
                ) from result
            out.append(result)
        return out
