"""``from_arrow``, ``from_polars``, ``from_pandas``: in-memory tables as datasets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .._shm import is_sharing
from ..errors import ConfigError
from .arrow_blocks import ArrowBlocks
from .blocks import BlockTable, check_cache_bytes
from .columns import Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .extras import require
from .parquet import ParquetDataset, from_parquet
from .row_layout import stack_columns
from .shared import SharedArray, share_lock

__all__ = ["ArrowDataset", "ScannedDataset", "from_arrow", "from_pandas", "from_polars"]


def _ipc_bytes(table: Any) -> np.ndarray:
    """``table`` in the Arrow IPC stream format, as a uint8 array."""
    pa = require("pyarrow", "arrow")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return np.frombuffer(sink.getvalue(), dtype=np.uint8)


def _from_ipc(data: np.ndarray) -> Any:
    """The table in ``data`` (IPC stream bytes), without copying them."""
    pa = require("pyarrow", "arrow")
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class ArrowDataset(ArrowBlocks):
    """Rows of an in-memory Arrow table; built by :func:`from_arrow`, :func:`from_polars`
    and :func:`from_pandas`.

    A shuffled batch is an Arrow ``take`` of its rows from each chunk it touches,
    converted column by column; a sequential one is gathered from blocks of the table
    converted once (see :mod:`stoker._sources.arrow_blocks`). Process
    workers share one copy of the table instead of each unpickling its own: when the
    loader pickles the pipeline for them, the table is written once (Arrow IPC) into
    a shared-memory segment, and each worker reads it in place.

    Example:
        >>> import pyarrow as pa
        >>> ds = from_arrow(pa.table({"x": [1, 2, 3], "s": ["a", "b", "c"]}))
        >>> len(ds), int(ds[1]["x"]), ds[1]["s"]
        (3, 2, 'b')

    Resources:
        The shared copy, once made, belongs to this dataset: its segment is released
        when the dataset is garbage collected.
    """

    _transient: ClassVar[tuple[str, ...]] = (*ArrowBlocks._transient, "_shared")

    def __init__(
        self, table: Any, columns: list[str], what: str, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        self._table = table.select(columns)
        self._what = what
        self._shared: SharedArray | None = None
        self._arrow_blocks(int(self._table.num_rows), cache_bytes)

    def __len__(self) -> int:
        return int(self._table.num_rows)

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    @property
    def table(self) -> Any:
        """The Arrow table read (only the selected columns)."""
        return self._table

    def _arrow_table(self) -> Any:
        return self._table

    def _source_name(self) -> str:
        kind = self._what.split()[-2].lower()  # "a Polars DataFrame" -> polars
        maker = f"from_{kind}" if kind in ("polars", "pandas") else "from_arrow"
        return f"{maker}({self._what} of {len(self):,} rows)"

    def _column_lengths(self, key: str) -> Any:
        from .lengths import arrow_lengths

        if key not in self.columns:
            return super()._column_lengths(key)  # names the columns there are
        return arrow_lengths(self._table.column(key), key)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if is_sharing():
            with share_lock:
                if self._shared is None:
                    self._shared = SharedArray(_ipc_bytes(self._table))
            state["_table"] = None
            state["_ipc"] = self._shared
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        data = state.pop("_ipc", None)
        self.__dict__.update(state)
        if data is not None:
            self._table = _from_ipc(data)

    def __repr__(self) -> str:
        return f"ArrowDataset(len={len(self)}, columns={self.columns}, from {self._what})"


class ScannedDataset(BlockTable):
    """Rows of a ``pyarrow.dataset.Dataset`` (other than local Parquet files); built by
    :func:`from_arrow`.

    Blocks (see :class:`~stoker._sources.blocks.BlockTable`): each fragment's rows in
    runs of up to 65,536, read with one ``Fragment.take`` each and kept in the
    process's decode cache, so a shuffled epoch reads each block about once while the
    blocks fit ``cache_bytes`` (else :meth:`shuffle_sampler`).

    Resources:
        Each process lists the fragments once; Arrow opens their files for each read.
    """

    _handle_per_thread: ClassVar[bool] = False  # the handle: the fragments, listed once
    _block_unit: ClassVar[str] = "fragment pieces"

    def __init__(
        self, dataset: Any, columns: list[str], cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        from .arrow_blocks import BLOCK_ROWS

        self._dataset = dataset
        self._columns = columns
        sizes: list[int] = []
        self._pieces: list[tuple[int, int]] = []  # block -> (fragment number, first row)
        for number, fragment in enumerate(dataset.get_fragments()):
            rows = int(fragment.count_rows())
            for first in range(0, rows, BLOCK_ROWS):
                sizes.append(min(BLOCK_ROWS, rows - first))
                self._pieces.append((number, first))
        self._len = sum(sizes)
        self._set_blocks(sizes, cache_bytes)

    def __len__(self) -> int:
        return self._len

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    def _source_name(self) -> str:
        return f"from_arrow(a pyarrow dataset of {self._len:,} rows)"

    def _open_handle(self) -> list[Any]:
        return list(self._dataset.get_fragments())

    def _read_block(self, block: int) -> Columns:
        from .arrow_columns import pa, table_columns

        number, first = self._pieces[block]
        rows = np.arange(first, first + int(self._starts[block + 1] - self._starts[block]))
        table = self._handle()[number].take(pa.array(rows), columns=self._columns)
        return stack_columns(table_columns(table))


def _local_parquet_files(dataset: Any) -> list[str] | None:
    """The files of a Parquet ``FileSystemDataset`` on the local disk, else None."""
    ds = require("pyarrow.dataset", "arrow")
    fs = require("pyarrow.fs", "arrow")
    if not isinstance(dataset, ds.FileSystemDataset):
        return None
    if not isinstance(dataset.format, ds.ParquetFileFormat):
        return None
    if not isinstance(dataset.filesystem, fs.LocalFileSystem):
        return None
    return list(dataset.files)


def from_arrow(
    table: Any, columns: Sequence[str] | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> ArrowDataset | ParquetDataset | ScannedDataset:
    """A map-style dataset over an Arrow ``Table``, ``RecordBatch`` or ``pyarrow.dataset.Dataset``.

    Needs ``pip install 'stoker[arrow]'``. A ``Dataset`` of local Parquet files is read
    like :func:`from_parquet` (row groups, decode cache); another ``Dataset`` with one
    ``Dataset.take`` per batch; a table is used in place, never copied.

    Args:
        table: the data.
        columns: the columns to read (default: all), in record order.
        cache_bytes: the most this dataset's decoded blocks (row groups of local
            Parquet files, else runs of up to 65,536 rows) take in the decode cache
            of each process that reads it (default 256 MiB); the process's one cache
            holds all its table sources' blocks within the largest of their
            ``cache_bytes``.

    Example:
        >>> import pyarrow as pa
        >>> batch = pa.record_batch({"x": [1, 2]})
        >>> [int(r["x"]) for r in from_arrow(batch).__getitems__([1, 0])]
        [2, 1]

    Errors:
        ConfigError: not an Arrow table, record batch or dataset; a column that does not
            exist (the message names those that do); a column type stoker cannot batch;
            a ``cache_bytes`` that is not an int >= 0.
    """
    check_cache_bytes(cache_bytes)
    pa = require("pyarrow", "arrow")
    ds = require("pyarrow.dataset", "arrow")
    from .arrow_columns import check_schema

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if isinstance(table, ds.Dataset):
        chosen = check_schema(table.schema, columns, "the Arrow dataset")
        files = _local_parquet_files(table)
        if files:
            return from_parquet(files, chosen, cache_bytes=cache_bytes)
        return ScannedDataset(table, chosen, cache_bytes)
    if not isinstance(table, pa.Table):
        raise ConfigError(
            "from_arrow() needs a pyarrow.Table, RecordBatch or pyarrow.dataset.Dataset, "
            f"got {type(table).__name__}{_frame_hint(table)}"
        )
    chosen = check_schema(table.schema, columns, "the Arrow table")
    return ArrowDataset(table, chosen, "an Arrow table", cache_bytes)


def _frame_hint(obj: object) -> str:
    kind = frame_kind(obj)
    return f": use sk.from_{kind}(df) for a {kind} DataFrame" if kind else ""


def frame_kind(obj: object) -> str | None:
    """ "polars" or "pandas" for a DataFrame of that library, else None (never imports them)."""
    module = type(obj).__module__.split(".")[0]
    if type(obj).__name__ == "DataFrame" and module in ("polars", "pandas"):
        return module
    return None


def from_polars(
    df: Any, columns: Sequence[str] | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> ArrowDataset:
    """A map-style dataset over the rows of a Polars ``DataFrame`` (``stoker[polars]``).

    The frame is viewed as Arrow (``DataFrame.to_arrow``, without copying numeric
    columns); records are dicts column -> value, batches dicts column -> array.

    Args:
        df: the frame.
        columns: the columns to read (default: all), in record order.
        cache_bytes: the most this dataset's decoded blocks (runs of up to 65,536
            rows) take in the decode cache of each process that reads it (default
            256 MiB); the process's one cache holds all its table sources' blocks
            within the largest of their ``cache_bytes``.

    Example:
        >>> import polars as pl
        >>> ds = from_polars(pl.DataFrame({"x": [1, 2], "s": ["a", "b"]}))
        >>> int(ds[1]["x"]), ds[1]["s"]
        (2, 'b')

    Errors:
        ConfigError: not a Polars DataFrame (a LazyFrame: ``collect()`` it first); a
            column that does not exist; a column type stoker cannot batch; a
            ``cache_bytes`` that is not an int >= 0.
    """
    check_cache_bytes(cache_bytes)
    pl = require("polars", "polars")
    from .arrow_columns import check_schema

    if isinstance(df, pl.LazyFrame):
        raise ConfigError("from_polars() needs a DataFrame: call .collect() on the LazyFrame first")
    if not isinstance(df, pl.DataFrame):
        raise ConfigError(f"from_polars() needs a polars.DataFrame, got {type(df).__name__}")
    table = df.to_arrow()
    chosen = check_schema(table.schema, columns, "the Polars DataFrame")
    return ArrowDataset(table, chosen, "a Polars DataFrame", cache_bytes)


def from_pandas(
    df: Any, columns: Sequence[str] | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> ArrowDataset:
    """A map-style dataset over the rows of a pandas ``DataFrame`` (``stoker[pandas]``).

    The frame is converted to Arrow once (``pyarrow.Table.from_pandas``, without its
    index); records are dicts column -> value, batches dicts column -> array.

    Args:
        df: the frame.
        columns: the columns to read (default: all), in record order.
        cache_bytes: the most this dataset's decoded blocks (runs of up to 65,536
            rows) take in the decode cache of each process that reads it (default
            256 MiB); the process's one cache holds all its table sources' blocks
            within the largest of their ``cache_bytes``.

    Example:
        >>> import pandas as pd
        >>> ds = from_pandas(pd.DataFrame({"x": [1.5, 2.5], "s": ["a", "b"]}))
        >>> float(ds[0]["x"]), ds[0]["s"]
        (1.5, 'a')

    Errors:
        ConfigError: not a pandas DataFrame; a column that does not exist; a column
            stoker cannot batch (Python objects Arrow cannot type, nested lists); a
            ``cache_bytes`` that is not an int >= 0.
    """
    check_cache_bytes(cache_bytes)
    pd = require("pandas", "pandas")
    pa = require("pyarrow", "arrow")
    from .arrow_columns import check_schema

    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"from_pandas() needs a pandas.DataFrame, got {type(df).__name__}")
    if columns is not None:
        from .arrow_columns import select_columns

        df = df[select_columns([str(c) for c in df.columns], columns, "the pandas DataFrame")]
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"the pandas DataFrame has a column Arrow cannot type: {exc}") from exc
    chosen = check_schema(table.schema, None, "the pandas DataFrame")
    return ArrowDataset(table, chosen, "a pandas DataFrame", cache_bytes)
