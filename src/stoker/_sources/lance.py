"""``from_lance``: rows of a Lance dataset, read with one ``take`` per batch."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError
from .blocks import BlockTable, check_cache_bytes, source_name
from .columns import Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .extras import require
from .row_layout import stack_columns

__all__ = ["LanceDataset", "from_lance"]

BLOCK_ROWS = 8192
"""The most rows in one block: a fragment is read in pieces of this many rows."""


def _open(uri: str, version: int | None, storage_options: dict[str, str] | None) -> Any:
    lance = require("lance", "lance")
    return lance.dataset(uri, version=version, storage_options=storage_options)


class LanceDataset(BlockTable):
    """Rows of one version of a Lance dataset; built by :func:`from_lance`.

    Blocks (see :class:`~stoker._sources.blocks.BlockTable`): each fragment's rows in
    runs of up to 8,192. A batch spread over many blocks (``shuffle=True``) is one
    Lance ``take`` of its rows (only the columns asked for); a batch whose rows fall in
    few blocks (a sequential read, :meth:`shuffle_sampler`) reads each block it
    touches whole, once, and keeps it in the process's decode cache. The version is
    fixed when the dataset is built: rows written to the Lance dataset later are not
    read, and every worker reads the same rows.

    Example:
        >>> import lance, pyarrow as pa, tempfile, os
        >>> uri = os.path.join(tempfile.mkdtemp(), "t.lance")
        >>> _ = lance.write_dataset(pa.table({"x": [1, 2, 3], "s": ["a", "b", "c"]}), uri)
        >>> ds = from_lance(uri)
        >>> len(ds), int(ds[2]["x"]), ds[2]["s"]
        (3, 3, 'c')

    Resources:
        It pickles as its URI, version and columns; each process opens the Lance
        dataset again the first time it reads (a handle shared by its threads).

    Errors:
        See :func:`from_lance`.
    """

    _transient: ClassVar[tuple[str, ...]] = (*BlockTable._transient, "_opened")
    _handle_per_thread: ClassVar[bool] = False  # a Lance dataset serves every thread
    _reads_rows: ClassVar[bool] = True
    _block_unit: ClassVar[str] = "fragment pieces"

    def __init__(
        self,
        uri: str,
        version: int,
        columns: list[str],
        length: int,
        storage_options: dict[str, str] | None,
        handle: Any,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._uri = uri
        self._version = version
        self._columns = columns
        self._len = length
        self._storage_options = storage_options
        self._opened: Any = handle  # the handle from the build, used by its process
        sizes: list[int] = []
        self._pieces: list[tuple[int, int]] = []  # block -> (fragment id, first row)
        for fragment in handle.get_fragments():
            rows = int(fragment.count_rows())
            for first in range(0, rows, BLOCK_ROWS):
                sizes.append(min(BLOCK_ROWS, rows - first))
                self._pieces.append((int(fragment.fragment_id), first))
        self._set_blocks(sizes, cache_bytes)

    def __len__(self) -> int:
        return self._len

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def uri(self) -> str:
        """The Lance dataset read."""
        return self._uri

    @property
    def version(self) -> int:
        """The version of the Lance dataset read."""
        return self._version

    def _source_name(self) -> str:
        return source_name("from_lance", [self._uri])

    def _open_handle(self) -> Any:
        opened = self._opened
        if opened is not None:
            return opened
        return _open(self._uri, self._version, self._storage_options)

    def _read_rows(self, indices: np.ndarray) -> Columns:
        from .arrow_columns import pa, table_columns

        table = self._handle().take(pa.array(indices), columns=self._columns)
        if table.num_rows != len(indices):
            raise RuntimeError(
                f"Lance returned {table.num_rows} rows for {len(indices)} indices from "
                f"{self._uri!r} (version {self._version})"
            )
        return table_columns(table)

    def _read_block(self, block: int) -> Columns:
        from .arrow_columns import table_columns

        fragment_id, first = self._pieces[block]
        rows = int(self._starts[block + 1] - self._starts[block])
        fragment = self._handle().get_fragment(fragment_id)
        table = fragment.to_table(columns=self._columns, offset=first, limit=rows)
        if table.num_rows != rows:
            raise RuntimeError(
                f"Lance returned {table.num_rows} rows of fragment {fragment_id} for {rows} "
                f"from {self._uri!r} (version {self._version})"
            )
        return stack_columns(table_columns(table))

    def __repr__(self) -> str:
        return (
            f"LanceDataset(len={self._len}, columns={self._columns}, uri={self._uri!r}, "
            f"version={self._version})"
        )


def _is_url(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def from_lance(
    uri: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    *,
    version: int | None = None,
    storage_options: dict[str, str] | None = None,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> LanceDataset:
    """A map-style dataset over the rows of a Lance dataset (``pip install 'stoker[lance]'``).

    The version read is fixed now (the latest, unless ``version`` names one), so the
    dataset reads the same rows in every worker and after a resume, even if rows are
    written to the Lance dataset in between. ``len`` is that version's row count.

    Args:
        uri: the Lance dataset: a local path or a URL Lance understands
            (``s3://...``, ``gs://...``, ...), or an open ``lance.LanceDataset``
            (read at the version it shows).
        columns: the columns to read (default: all), in record order.
        version: the version to read (default: the latest).
        storage_options: passed to ``lance.dataset`` (credentials, endpoints).
        cache_bytes: the most this dataset's decoded blocks (runs of up to 65,536
            rows of a fragment) take in the decode cache of each process that reads
            it (default 256 MiB); the process's one cache holds all its table
            sources' blocks within the largest of their ``cache_bytes``.

    Returns:
        A :class:`LanceDataset` whose records are dicts column -> value.

    Example:
        >>> import lance, pyarrow as pa, tempfile, os
        >>> uri = os.path.join(tempfile.mkdtemp(), "t.lance")
        >>> _ = lance.write_dataset(pa.table({"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]}), uri)
        >>> ds = from_lance(uri, columns=["y"])
        >>> [float(r["y"]) for r in ds.__getitems__([2, 0])]
        [2.5, 0.5]

    Errors:
        ConfigError: no Lance dataset at ``uri`` (or not that version), a column
            that does not exist (naming those that do), a column type stoker cannot
            batch, a ``cache_bytes`` that is not an int >= 0.
        MissingExtra: ``pylance`` is not installed.
    """
    lance = require("lance", "lance")
    from .arrow_columns import check_schema

    check_cache_bytes(cache_bytes)
    if isinstance(uri, lance.LanceDataset):  # read by its URI, at the version it shows
        version = uri.version if version is None else version
        uri = uri.uri
    if not isinstance(uri, str | os.PathLike):
        raise ConfigError(f"from_lance() needs a path or URL, got {type(uri).__name__}")
    text = os.fspath(uri)
    if not _is_url(text) and not Path(text.removeprefix("file://")).is_dir():
        raise ConfigError(f"no Lance dataset at {text!r}: the directory does not exist")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ConfigError(f"version must be an int, got {version!r}")
    try:
        handle = _open(text, version, storage_options)
    except (ValueError, OSError) as exc:
        at = text if version is None else f"{text!r} version {version}"
        raise ConfigError(f"cannot open a Lance dataset at {at}: {exc}") from exc
    chosen = check_schema(handle.schema, columns, f"the Lance dataset {text!r}")
    return LanceDataset(
        text,
        int(handle.version),
        chosen,
        int(handle.count_rows()),
        storage_options,
        handle,
        cache_bytes,
    )
