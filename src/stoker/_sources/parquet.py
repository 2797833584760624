"""``from_parquet``: rows of Parquet files, read a row group at a time."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from .._context import Context
from ..errors import ConfigError
from .block_gather import gather_batch, split_blocks, take_columns, which_blocks
from .blocks import BlockTable, check_cache_bytes, source_name
from .columns import Columns, columns_nbytes
from .decode_cache import DEFAULT_CACHE_BYTES, count_decode, count_hits
from .decoded_copy import auto_copy_root, building, flat_type, write_copy
from .extras import require
from .parquet_files import parquet_paths
from .parquet_meta import read_layout
from .remote import Remote, is_url
from .retry import RetryPolicy, check_policy
from .row_layout import stack_columns
from .spill import SpillFolder, default_cache_dir

__all__ = ["ParquetDataset", "from_parquet"]

PathLike = str | os.PathLike[str]


class ParquetDataset(BlockTable):
    """Rows of one or more Parquet files; built by :func:`from_parquet`.

    ``len`` is the total row count from the files' metadata (no data is decoded to
    build it). Its blocks (see :class:`~stoker._sources.blocks.BlockTable`) are the
    row groups: a batch is read with one decode per row group it touches, of only the
    columns asked for; decoded row groups are kept, within ``cache_bytes``, in the
    process's decode cache (as NumPy columns, so a batch is gathered with NumPy
    indexing), so a
    shuffled epoch decodes each row group about once while the row groups it visits
    fit. When they do not, by default (``cache_dir="auto"``) the first batch writes a
    decoded copy of the files to local disk once, and every batch, epoch, run and
    worker then gathers its rows from that copy, memory-mapped (see
    :func:`from_parquet`); :meth:`shuffle_sampler` (contiguous row groups in random
    order, mixed within a window) is the way to visit only a few row groups at a time
    without a copy. With ``cache_dir=`` a folder, a row group is decoded once, ever:
    it is written there as NumPy data and every later read maps it.

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
        >>> pq.write_table(pa.table({"x": [1, 2, 3], "s": ["a", "b", "c"]}), path)
        >>> ds = from_parquet(path)
        >>> len(ds), int(ds[2]["x"]), ds[2]["s"]
        (3, 3, 'c')

    Resources:
        Each thread that reads opens its own handle on each file it reads; handles
        are left out of a pickle and opened again in each worker, and each process
        decodes into its own cache. A decoded copy (``cache_dir``) is a layer on disk
        below that cache, shared by processes and runs. A row group mapped from
        ``cache_dir`` holds a read-only memory map (and its file descriptor) while it
        is in the cache (counted at its size).

    Errors:
        See :func:`from_parquet`.
    """

    _transient: ClassVar[tuple[str, ...]] = (*BlockTable._transient, "_whole", "_copied")
    _block_unit: ClassVar[str] = "row groups"
    _decoded_copy: ClassVar[bool] = True

    def __init__(
        self,
        paths: list[str],
        columns: list[str],
        rows: list[list[int]],
        cache_bytes: int,
        group_bytes: int = 0,
        remote: Remote | None = None,
        spills: list[SpillFolder] | None = None,
        auto_copy: bool = False,
    ) -> None:
        self._paths = paths
        self._auto_copy = auto_copy  # spills: a copy made whole before the first read
        self._copied = False
        self._copy_decodes = 0  # row groups decoded to write the copy
        self._remote = remote
        self._spills = spills
        self._columns = columns
        sizes = [n for file_rows in rows for n in file_rows]
        self._groups = [(f, g) for f, file_rows in enumerate(rows) for g in range(len(file_rows))]
        # Blocks: the row groups (the largest one's uncompressed size from the metadata).
        self._set_blocks(sizes, cache_bytes, group_bytes)
        self._len = sum(sizes)
        self._group_bytes = group_bytes
        self._files_rows = [sum(file_rows) for file_rows in rows]
        self._rows_of = rows  # each file's row groups' rows
        self._file_starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(self._files_rows, out=self._file_starts[1:])
        # Each file's rows mapped whole from cache_dir (None: not looked for yet).
        self._whole: list[Columns] | None = None

    def __len__(self) -> int:
        return self._len

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def paths(self) -> list[str]:
        """The files read, in order."""
        return list(self._paths)

    def _source_name(self) -> str:
        return source_name("from_parquet", self._paths)

    @property
    def row_group_sizes(self) -> list[int]:
        """Rows in every row group, in dataset order."""
        return self.block_sizes

    @property
    def cache_folders(self) -> list[str]:
        """The folders holding each file's decoded row groups (empty without ``cache_dir``)."""
        return [str(s.folder) for s in self._spills or []]

    @property
    def decoded_row_groups(self) -> int:
        """Row groups decoded so far by this copy of the dataset (cache misses)."""
        return self._copy_decodes + self.blocks_decoded

    def write_cache(self) -> int:
        """Decode every row group not yet in ``cache_dir`` and write it there, now.

        Without it, row groups are written as the first epoch reaches them; with it,
        the first epoch too reads mapped data (as HuggingFace ``datasets`` converts a
        Parquet file to its Arrow copy before use). Each file's rows are then also
        written end to end (``rows.bin``) and every later batch is one gather from
        that file's mapping. Returns the row groups written. With ``cache_dir="auto"``
        (when it plans a copy), it writes the decoded copy now instead of at the
        first batch, and returns the row groups decoded for it.

        Example:
            >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
            >>> root = tempfile.mkdtemp()
            >>> path = os.path.join(root, "t.parquet")
            >>> pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=4)
            >>> ds = from_parquet(path, cache_dir=os.path.join(root, "decoded"))
            >>> ds.write_cache(), ds.write_cache()
            (3, 0)

        Errors:
            ConfigError: the dataset was built without ``cache_dir``.
        """
        if self._spills is None:
            raise ConfigError(
                "write_cache() needs a dataset built with from_parquet(cache_dir=...)"
            )
        if self._auto_copy:  # cache_dir="auto": the copy, now
            before, self._copied = self._copy_decodes, False
            self._make_copy()
            return self._copy_decodes - before
        from .arrow_columns import table_columns

        written = 0
        for file_number, row_group in self._groups:
            spill = self._spills[file_number]
            if not spill.has(row_group):
                handle = self._file(file_number)
                table = handle.read_row_group(row_group, columns=self._columns)
                columns = stack_columns(table_columns(table))
                self._copy_decodes += 1
                count_decode(columns_nbytes(columns), again=False)
                written += spill.save(row_group, columns)
        groups_of = [0] * len(self._spills)
        for file_number, _ in self._groups:
            groups_of[file_number] += 1
        for spill, groups in zip(self._spills, groups_of, strict=True):
            spill.write_rows(groups)
        self._whole = None  # look for them again
        return written

    def _make_copy(self) -> None:
        """With ``cache_dir="auto"``: write the decoded copy once, before the first read
        (the first thread or process to get here; the others wait, then map it)."""
        spills = self._spills
        if self._copied or spills is None:
            return
        with building(spills[0].folder):
            if not self._whole_files():
                groups_of = [len(rows) for rows in self._rows_of]
                self._copy_decodes += write_copy(
                    self._file,
                    self._files_rows,
                    groups_of,
                    spills,
                    self._columns,
                    self._group_bytes,
                    self._cache_bytes,
                )
                self._whole = None  # look for them again
            self._copied = True

    def _open_handle(self) -> dict[int, Any]:
        return {}  # this thread's handles, by file number, opened as they are read

    def _file(self, number: int) -> Any:
        files: dict[int, Any] = self._handle()
        handle = files.get(number)
        if handle is None:
            pq = require("pyarrow.parquet", "arrow")
            if self._remote is None:
                handle = pq.ParquetFile(self._paths[number], memory_map=True)
            else:
                handle = pq.ParquetFile(self._remote.open_file(self._paths[number]))
            files[number] = handle
        return handle

    def _read_block(self, block: int) -> Columns:
        """Row group number ``block`` (of the dataset) decoded into NumPy columns: mapped
        from ``cache_dir`` when a folder holds it, else decoded (and written there)."""
        from .arrow_columns import table_columns

        file_number, row_group = self._groups[block]
        # The automatic copy's folder holds rows.bin only (never single row groups).
        spill = None if self._spills is None or self._auto_copy else self._spills[file_number]
        if spill is not None:
            mapped = spill.load(row_group)
            if mapped is not None:
                return mapped
        try:
            table = self._file(file_number).read_row_group(row_group, columns=self._columns)
        except FileNotFoundError as exc:
            raise FileNotFoundError(
                f"the Parquet file {self._paths[file_number]!r} was removed after the "
                "dataset was built"
            ) from exc
        columns = stack_columns(table_columns(table))
        if spill is not None and spill.save(row_group, columns):
            return spill.load(row_group) or columns
        return columns

    def _read_columns(self, indices: np.ndarray) -> Columns:
        if self._auto_copy and not self._copied:
            self._make_copy()
        whole = self._whole_files()
        if whole:  # one take from each file's rows
            files = np.searchsorted(self._file_starts, indices, side="right") - 1
            unique, file_of = which_blocks(files)
            rows = indices - self._file_starts[files]
            count_hits(len(unique))
            return take_columns([whole[f] for f in unique.tolist()], file_of, rows)
        return super()._read_columns(indices)

    def _whole_files(self) -> list[Columns]:
        """Each file's rows mapped whole from ``cache_dir`` (written by
        :meth:`write_cache` or the automatic copy) when every file has them; else empty."""
        whole = self._whole
        if whole is None:
            whole = []
            if self._spills is not None:
                found = [spill.load_rows() for spill in self._spills]
                counts = [len(next(iter(c.values()))) if c else -1 for c in found]
                if counts == self._files_rows:
                    whole = [c for c in found if c is not None]  # all mapped
            self._whole = whole
        return whole

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        if self._auto_copy and not self._copied:
            self._make_copy()
        whole = self._whole_files()
        if whole:  # one gather from each file's rows, whatever the row groups
            if len(whole) == 1:
                count_hits(1)
                return gather_batch(whole, None, indices, out)
            files = np.searchsorted(self._file_starts, indices, side="right") - 1
            unique, by_file = split_blocks(files, len(whole))
            rows = indices - self._file_starts[files]
            count_hits(len(unique))
            return gather_batch([whole[f] for f in unique], by_file, rows, out)
        return super()._gather(indices, ctx, out)


def from_parquet(
    paths: PathLike | Sequence[PathLike],
    columns: Sequence[str] | None = None,
    *,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    cache_dir: PathLike | bool | Literal["auto"] | None = "auto",
    storage_options: dict[str, Any] | None = None,
    retry: RetryPolicy | None = None,
) -> ParquetDataset:
    """A map-style dataset over the rows of Parquet files (``pip install 'stoker[arrow]'``).

    Args:
        paths: a file, a directory of Parquet files, a glob, or a list of them; files
            are read in sorted order (directories recursively). fsspec URLs work too
            (``s3://bucket/data/*.parquet``, ``http://host/a.parquet``,
            ``memory://...``; ``pip install 'stoker[remote]'`` plus the protocol's
            package, such as ``s3fs``): HTTP takes explicit file URLs (no glob).
        columns: the columns to read (default: all), in record order.
        cache_bytes: the most this dataset's decoded row groups take in the decode
            cache of each process that reads it (default 256 MiB); the process's one
            cache holds all its table sources' blocks within the largest of their
            ``cache_bytes``.
        cache_dir: ``"auto"`` (the default): when the decoded columns read are larger
            than ``cache_bytes`` (a shuffle would decode row groups again and again),
            the first batch read writes a decoded copy of the files once, with a
            progress bar, to the default folder below, and every later batch, epoch,
            run and worker gathers its rows from it (as with
            :meth:`ParquetDataset.write_cache`); not for URLs, string or binary
            columns, or a disk with less than three times the copy's size free (then
            the row groups are decoded into the memory cache as with ``None``).
            ``None`` or ``False``: no copy, the memory cache only. Else a local
            folder (one named ``auto``: ``Path("auto")``) where each row group, once
            decoded, is written as NumPy data and memory-mapped on every later read
            (``True``: the default folder, ``$XDG_CACHE_HOME/stoker/parquet``).
            Later epochs (and later
            runs, and other workers) then read decoded data from the page cache
            instead of decoding again: use it when the decoded columns are larger
            than ``cache_bytes``, or the files are remote. It holds about the decoded
            size of the columns read, one copy per file and column selection (keyed
            by path, size, modification time and columns; an older copy of the same
            file is removed when the dataset is built). Row groups with string or
            binary columns are not written. :meth:`ParquetDataset.write_cache` also
            writes each file's rows end to end (``rows.bin``, as large again), and
            batches are then gathered from it in one read whichever row groups they
            touch. For a URL, the version is the size and
            whatever the server reports of a modification time or ETag: over plain
            HTTP without them, a changed file of the same size is not noticed (delete
            the folder).
        storage_options: options for the fsspec file system of URL paths (such as
            credentials or an endpoint).
        retry: how reads of URLs are retried when the store throttles or fails (a
            :class:`~stoker.RetryPolicy`; None: its defaults). Footers and row groups
            of URLs are read by range: a row group costs its column chunks' bytes.

    Returns:
        A :class:`ParquetDataset` whose records are dicts column -> value.

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
        >>> root = tempfile.mkdtemp()
        >>> pq.write_table(pa.table({"x": [1, 2]}), os.path.join(root, "a.parquet"))
        >>> pq.write_table(pa.table({"x": [3]}), os.path.join(root, "b.parquet"))
        >>> ds = from_parquet(root)
        >>> len(ds), [int(r["x"]) for r in ds.__getitems__([2, 0])]
        (3, [3, 1])

    Errors:
        ConfigError: a missing path, a glob or directory with no file, a file that is
            not Parquet (naming it), files whose schemas differ, a column that does not
            exist (naming those that do), a column type stoker cannot batch.
        MissingExtra: pyarrow is not installed (or fsspec, for a URL).
    """
    require("pyarrow.parquet", "arrow")
    check_cache_bytes(cache_bytes)
    if storage_options is not None and not isinstance(storage_options, dict):
        raise ConfigError(f"storage_options must be a dict, got {storage_options!r}")
    files = parquet_paths(paths, storage_options)
    policy = check_policy(retry)
    remote = Remote(files[0], storage_options or {}, retry=policy) if is_url(files[0]) else None
    meta = read_layout(files, remote, columns)
    sources, rows, chosen, schema = meta.sources, meta.rows, meta.columns, meta.schema
    spills = None
    auto = isinstance(cache_dir, str) and cache_dir == "auto"
    if auto:
        flat = all(flat_type(schema.field(name).type) for name in chosen)
        auto_root = auto_copy_root(meta.decoded_bytes, cache_bytes, flat, remote is None)
        if auto_root is not None:
            key = {"columns": chosen, "copy": "whole"}  # a folder apart from cache_dir=True's
            spills = [SpillFolder(auto_root, {**source, **key}) for source in sources]
            try:
                for spill in spills:
                    spill.prepare()
            except OSError:
                spills = None  # no copy: the memory cache only
    elif cache_dir is not None and cache_dir is not False:
        root = default_cache_dir() if cache_dir is True else Path(os.fspath(cache_dir))
        spills = [SpillFolder(root, {**source, "columns": chosen}) for source in sources]
        try:
            for spill in spills:
                spill.prepare()
        except OSError as exc:
            raise ConfigError(
                f"cannot use {str(root)!r} as cache_dir ({exc}): pass a writable local folder"
            ) from exc
    copy = auto and spills is not None
    return ParquetDataset(files, chosen, rows, cache_bytes, meta.group_bytes, remote, spills, copy)
