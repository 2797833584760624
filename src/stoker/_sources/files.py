"""``from_files``: one record per file, ``{"path": str, "bytes": bytes}``, read lazily."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from ..errors import ConfigError
from .listing import check_on_unsafe, list_local
from .remote import DEFAULT_CONCURRENCY, Remote, is_url
from .retry import RetryPolicy, check_policy

__all__ = ["FilesDataset", "from_files", "read_local"]

PathLike = str | os.PathLike[str]


def read_local(path: str, name: str) -> bytes:
    """The bytes of the local file ``path`` (listed as ``name``).

    Errors:
        FileNotFoundError: the file was removed after it was listed (naming it).
    """
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            2, f"{name!r} was removed after the dataset was built (it was listed, then deleted)"
        ) from exc


class FilesDataset(DatasetNode[dict[str, Any]]):
    """Files as records ``{"path": str, "bytes": bytes}``; built by :func:`from_files`.

    The list of files is fixed when the dataset is built; a file's bytes are read
    when its record is asked for, in the worker, with the GIL released (local files)
    or concurrently with the rest of the batch (URLs).

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> for name in ("b.txt", "a.txt"):
        ...     with open(os.path.join(d, name), "wb") as f:
        ...         _ = f.write(name.encode())
        >>> ds = from_files(os.path.join(d, "*.txt"))
        >>> len(ds), ds[0]["bytes"], os.path.basename(ds[1]["path"])
        (2, b'a.txt', 'b.txt')

    Resources:
        For URLs, the fsspec file system is opened on first use in each process and
        left out of a pickle.

    Errors:
        FileNotFoundError: a listed file was deleted before it was read.
        RemoteReadError: a URL whose retry budget ran out (naming it and the tries).
        OSError: a read failed (the message names the file).
    """

    @property
    def releases_gil(self) -> bool:
        return True  # file reads wait with the GIL released

    def __init__(
        self,
        paths: list[str],
        real: list[str],
        remote: Remote | None,
        root: str,
        skipped: list[str],
    ) -> None:
        self._paths = paths
        self._real = real
        self._remote = remote
        self._root = root
        self._skipped = skipped

    def __len__(self) -> int:
        return len(self._paths)

    @property
    def paths(self) -> list[str]:
        """Every file, as listed (sorted), in record order."""
        return list(self._paths)

    @property
    def root(self) -> str:
        """The folder (or URL) that no symbolic link may lead out of."""
        return self._root

    @property
    def skipped(self) -> list[str]:
        """Unsafe links left out under ``on_unsafe="skip"``: ``"link: reason"`` each."""
        return list(self._skipped)

    def record_name(self, index: int) -> str:
        """The path of record ``index`` (named in errors about its contents)."""
        return self._paths[index]

    def read(self, indices: np.ndarray) -> list[bytes]:
        """The bytes of the files at ``indices`` (int64, in range), in that order."""
        items = indices.tolist()
        if self._remote is not None:
            return self._remote.read_many([self._real[i] for i in items])
        return [read_local(self._real[i], self._paths[i]) for i in items]

    def _record_name(self, index: int, ctx: Context) -> str | None:
        return self.record_name(index)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[dict[str, Any] | Skip]:
        data = self.read(indices)
        return [
            {"path": self._paths[i], "bytes": b}
            for i, b in zip(indices.tolist(), data, strict=True)
        ]

    def __repr__(self) -> str:
        return f"FilesDataset(len={len(self)}, root={self._root!r})"


def from_files(
    pattern_or_paths: PathLike | Sequence[PathLike],
    root: PathLike | None = None,
    *,
    on_unsafe: str = "error",
    storage_options: dict[str, Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    retry: RetryPolicy | None = None,
) -> FilesDataset:
    """A map-style dataset with one record per file: ``{"path": str, "bytes": bytes}``.

    Args:
        pattern_or_paths: a glob (``"data/**/*.jpg"``; ``**`` spans folders), a
            folder (every file below it), a file, or a list of them; or fsspec URLs
            (``"s3://bucket/train/*.jpg"``, a list of ``https://`` URLs) with
            ``pip install 'stoker[remote]'``. Patterns and folders are listed in
            sorted order, hidden names (``.``-prefixed) left out; a list keeps its order.
        root: the folder no symbolic link may lead out of (default: the pattern's part
            before its first glob character; a folder itself; for a list, the folder
            that holds every item).
        on_unsafe: what to do with a symbolic link that leaves ``root``, loops or
            points to nothing: ``"error"`` (default) refuses to build, naming the
            link; ``"skip"`` leaves it out (see :attr:`FilesDataset.skipped`).
            Links inside ``root`` are followed.
        storage_options: passed to the fsspec file system of URLs.
        concurrency: most requests in flight at once in each process on an asynchronous
            file system, shared by every batch its workers read.
        retry: how reads of URLs are retried when the store throttles or fails (HTTP
            429 and 5xx, resets, timeouts, truncated bodies): a
            :class:`~stoker.RetryPolicy`; None: its defaults (10 tries, back-off from
            0.1 s with full jitter, at most 120 s a read).

    Returns:
        A :class:`FilesDataset`.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp(); os.mkdir(os.path.join(d, "sub"))
        >>> with open(os.path.join(d, "sub", "x.bin"), "wb") as f:
        ...     _ = f.write(b"xyz")
        >>> [r["bytes"] for r in from_files(d)]
        [b'xyz']

    Errors:
        ConfigError: a pattern that matches nothing, a missing file or folder, an
            unsafe link (with ``on_unsafe="error"``), mixed file systems.
        MissingExtra: a URL without fsspec installed.
    """
    check_on_unsafe(on_unsafe)
    policy = check_policy(retry)
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
    items = (
        [pattern_or_paths]
        if isinstance(pattern_or_paths, str | os.PathLike)
        else list(pattern_or_paths)
    )
    if not items:
        raise ConfigError("from_files() needs at least one path, glob or folder")
    if any(is_url(item) for item in items):
        urls = [os.fspath(item) for item in items]
        remote = Remote(urls[0], storage_options or {}, concurrency, policy)
        found = remote.list_files(urls)
        return FilesDataset(found, found, remote, os.fspath(root or urls[0]), [])
    listing, base = list_local(pattern_or_paths, root, on_unsafe)
    if not listing.paths:
        raise ConfigError(
            f"no file to read in {pattern_or_paths!r}: every match was an unsafe link "
            f"({len(listing.skipped)} skipped)"
        )
    return FilesDataset(listing.paths, listing.real, None, base, listing.skipped)
