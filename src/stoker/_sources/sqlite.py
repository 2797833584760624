"""``from_sqlite``: rows of an SQLite table or query, one query per batch."""

from __future__ import annotations

import os
import urllib.parse
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import ConfigError
from .blocks import BlockTable, check_cache_bytes, source_name
from .columns import Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .row_layout import stack_columns
from .sqlite_schema import Params, check_params, column_kinds, quote, rowid_alias, rowid_name
from .values import take_rows, to_column

if TYPE_CHECKING:
    import sqlite3  # imported when a database is opened: `import stoker` stays lean

__all__ = ["SQLiteDataset", "from_sqlite"]

PathLike = str | os.PathLike[str]

_MAX_RANGES = 16  # a batch in more contiguous runs than this is read with an IN list
DEFAULT_BLOCK_ROWS = 4096
"""Rows in one block of consecutive rows, read with one range query and kept as columns."""
_TEMP = '"__stoker_rows"'
_FETCH_ROWS = 256  # rows fetched at a time (see _fetch_columns)


def _connect(path: str) -> sqlite3.Connection:
    import sqlite3

    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    # Each connection is used by the one thread that opened it; check_same_thread is
    # off only so that whichever thread drops the last reference may close it.
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _fetch_columns(cursor: sqlite3.Cursor, width: int) -> list[list[Any]]:
    """The rows of ``cursor`` as ``width`` lists of values, one per column.

    A few rows at a time: each row is a tuple, a container that the garbage collector
    counts; thousands alive at once make it run (and walk every object of the
    process) again and again. Short-lived, they never set it off.
    """
    lists: list[list[Any]] = [[] for _ in range(width)]
    while rows := cursor.fetchmany(_FETCH_ROWS):
        for values, column in zip(lists, zip(*rows, strict=True), strict=True):
            values.extend(column)
    return lists


def _rowids(conn: sqlite3.Connection, table: str, rowid: str, length: int) -> np.ndarray:
    """The rowids of a table's ``length`` rows, in order: a range when they run without
    a gap (no row deleted: two lookups), else listed (a second or more for tens of
    millions of rows)."""
    lo, hi = conn.execute(f"SELECT min({rowid}), max({rowid}) FROM {table}").fetchone()
    if lo is None:
        return np.empty(0, dtype=np.int64)
    if hi - lo + 1 == length:  # distinct integers, as many as the span holds
        return np.arange(lo, hi + 1, dtype=np.int64)
    cursor = conn.execute(f"SELECT {rowid} FROM {table} ORDER BY {rowid}")
    return np.fromiter((r[0] for r in cursor), dtype=np.int64, count=length)


class _Connection:
    """One thread's read-only connection, closed when the thread or the dataset goes."""

    __slots__ = ("__weakref__", "conn", "ready")

    def __init__(self, path: str) -> None:
        self.conn = _connect(path)
        self.ready = False
        weakref.finalize(self, self.conn.close)


class SQLiteDataset(BlockTable):
    """Rows of an SQLite table or query; built by :func:`from_sqlite`.

    A table is read by rowid: record ``i`` is the table's ``i``-th row in rowid order
    (the rowids are listed once, when the dataset is built), and a batch is one query,
    ``WHERE rowid BETWEEN ...`` for contiguous runs of rows or ``WHERE rowid IN (...)``
    otherwise. A query's rows are copied once per connection into a temporary table
    (in SQLite's temp store, never the database), numbered in the query's order; a
    batch is then one rowid lookup in it. Rows come back in the order asked for.

    Blocks (see :class:`~stoker._sources.blocks.BlockTable`): a batch whose rows fall
    in few blocks of ``block_rows`` consecutive records (at least 16 rows per block
    touched: a sequential read, or the order of :meth:`shuffle_sampler`) reads each
    block it touches whole, with one range query, converts it once to NumPy columns
    (the numbers side by side in the rows of one array) and keeps it, within
    ``cache_bytes``, in the process's decode cache; the batch is then gathered from
    the blocks. A table's ``INTEGER PRIMARY KEY`` column is the rowid: a block
    takes it from the rowids listed at build instead of reading it again. A shuffled
    batch spread over many blocks (``shuffle=True``) is gathered from the blocks held
    when it falls in those only, else looked up by rowid as above. Both read the same
    values; a value that does not fit its column is reported by the batch that reads
    its record (a block holding one is read row by row from then on).

    Example:
        >>> import sqlite3, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.db")
        >>> with sqlite3.connect(path) as conn:
        ...     _ = conn.execute("CREATE TABLE t (x INTEGER, s TEXT)")
        ...     _ = conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, "a"), (2, "b")])
        >>> conn.close()
        >>> ds = from_sqlite(path, "t")
        >>> len(ds), int(ds[1]["x"]), ds[1]["s"], ds.kinds
        (2, 2, 'b', {'x': 'int', 's': 'str'})

    Resources:
        Each thread that reads opens its own read-only connection (``mode=ro``),
        closed when that thread ends or the dataset is collected; connections are left
        out of a pickle, so each worker opens its own.

    Errors:
        :class:`~stoker.errors.RecordValueError` when a row read holds a
        value its column's kind cannot hold (a NULL outside a REAL column, text in an
        INTEGER column); a ``RuntimeError`` when the table or the query's row count
        changed after the dataset was built. See :func:`from_sqlite` for build errors.
    """

    _transient: ClassVar[tuple[str, ...]] = BlockTable._transient
    _block_unit: ClassVar[str] = "blocks of rows"
    _reads_rows: ClassVar[bool] = True  # a batch spread over blocks: one lookup by rowid

    def __init__(
        self,
        path: str,
        source: str,
        params: Params,
        columns: list[str],
        kinds: list[str],
        length: int,
        rowids: np.ndarray | None,
        rowid: str,
        alias: str | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._path = path
        self._source = source  # a quoted table name (rowids given) or a query
        self._params = params
        self._columns = columns
        self._kinds = kinds
        self._len = length
        self._rowids = rowids
        self._rowid = rowid
        self._alias = alias
        sizes = [block_rows] * (length // block_rows)
        self._set_blocks(sizes + [length % block_rows] * bool(length % block_rows), cache_bytes)
        self._block_rows = block_rows

    def __len__(self) -> int:
        return self._len

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def kinds(self) -> dict[str, str]:
        """The kind each column's values are read as (``int``, ``float``, ``str``, ``bytes``)."""
        return dict(zip(self._columns, self._kinds, strict=True))

    @property
    def block_rows(self) -> int:
        """Consecutive records read together by one range query (see the class docstring)."""
        return self._block_rows

    @property
    def blocks_read(self) -> int:
        """Blocks read by range query so far by this copy of the dataset (cache misses)."""
        return self.blocks_decoded

    def _source_name(self) -> str:
        return source_name("from_sqlite", [self._path])

    def _open_handle(self) -> _Connection:
        return _Connection(self._path)

    def _connection(self) -> sqlite3.Connection:
        handle: _Connection = self._handle()
        if not handle.ready:
            if self._rowids is None:
                self._materialise(handle.conn)
            handle.ready = True
        return handle.conn

    def _materialise(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS temp.{_TEMP}")
        conn.execute(f"CREATE TEMP TABLE {_TEMP} AS SELECT * FROM ({self._source})", self._params)
        (count,) = conn.execute(f"SELECT count(*) FROM temp.{_TEMP}").fetchone()
        if count != self._len:
            raise RuntimeError(
                f"the query now gives {count} rows, {self._len} when the dataset was built: "
                "the database changed; build the dataset again"
            )

    def _read_block(self, block: int) -> Columns:
        """Records ``[block * block_rows, ...)`` as columns: one range query."""
        lo = block * self._block_rows
        hi = min(lo + self._block_rows, self._len)
        if self._rowids is None:
            first, last, table = lo + 1, hi, f"temp.{_TEMP}"
        else:
            first, last, table = int(self._rowids[lo]), int(self._rowids[hi - 1]), self._source
        rowid = self._rowid
        # The rowid alias (an INTEGER PRIMARY KEY) is the rowid listed at build: not read.
        read = [c for c in self._columns if c != self._alias]
        select = ", ".join(quote(c) for c in read) or rowid
        sql = f"SELECT {select} FROM {table} WHERE {rowid} BETWEEN ? AND ? ORDER BY {rowid}"
        lists = _fetch_columns(self._connection().execute(sql, (first, last)), len(read) or 1)
        found = len(lists[0])
        if found != hi - lo:
            raise RuntimeError(
                f"records {lo}..{hi - 1} of {self._path!r} are now {found} rows, not "
                f"{hi - lo}: the database changed after the dataset was built; build it again"
            )
        values = dict(zip(read, lists, strict=False))

        def where_row(row: int) -> str:
            key = lo + row + 1 if self._rowids is None else int(self._rowids[lo + row])
            return f"record {lo + row} (rowid {key}) of {self._path!r}"

        columns: Columns = {}
        for name, kind in zip(self._columns, self._kinds, strict=True):
            if name == self._alias and self._rowids is not None:
                columns[name] = self._rowids[lo:hi]
            else:
                columns[name] = to_column(values[name], kind, name, where_row)
        return stack_columns(columns)

    def _read_rows(self, indices: np.ndarray) -> Columns:
        unique, inverse = np.unique(indices, return_inverse=True)
        if self._rowids is None:
            keys, table = unique + 1, f"temp.{_TEMP}"
        else:
            keys, table = self._rowids[unique], self._source
        rowid = self._rowid
        breaks = np.flatnonzero(np.diff(unique) != 1)
        if len(unique) and len(breaks) < _MAX_RANGES and 2 * (len(breaks) + 1) < len(unique):
            firsts = keys[np.concatenate(([0], breaks + 1))].tolist()
            lasts = keys[np.concatenate((breaks, [len(unique) - 1]))].tolist()
            where = " OR ".join(
                f"{rowid} BETWEEN {a} AND {b}" for a, b in zip(firsts, lasts, strict=True)
            )
        else:
            where = f"{rowid} IN ({','.join(map(str, keys.tolist()))})"
        select = ", ".join(quote(c) for c in self._columns)
        sql = f"SELECT {select} FROM {table} WHERE {where} ORDER BY {rowid}"
        values = _fetch_columns(self._connection().execute(sql), len(self._columns))
        if len(values[0]) != len(unique):
            raise RuntimeError(
                f"{len(unique) - len(values[0])} rows of the batch are no longer in the "
                f"database {self._path!r}: it changed after the dataset was built; build it again"
            )

        def where_row(row: int) -> str:
            return f"record {int(unique[row])} (rowid {int(keys[row])}) of {self._path!r}"

        columns: Columns = {}
        for name, kind, column in zip(self._columns, self._kinds, values, strict=True):
            converted = to_column(column, kind, name, where_row)
            columns[name] = take_rows(converted, inverse)
        return columns


def from_sqlite(
    path: PathLike,
    query_or_table: str,
    params: Params = (),
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> SQLiteDataset:
    """A map-style dataset over the rows of an SQLite table or ``SELECT`` query.

    The database is opened read-only (``mode=ro``). Each column's kind is fixed when
    the dataset is built, from its declared type (SQLite's affinity rules) or, without
    one, from the types of its first 1000 values: INTEGER -> int64, REAL -> float64
    (ints in it too), TEXT -> ``str``, BLOB -> ``bytes``. A NULL reads as NaN in a
    REAL column and is an error in any other column (``COALESCE`` it in a query).

    A query must give its rows in a deterministic order (end it with ``ORDER BY`` a
    unique key): each worker runs it once and numbers its rows in that order.

    Args:
        path: the database file.
        query_or_table: a table (or view) name, or a ``SELECT`` query.
        params: the query's parameters: a tuple for ``?``, a dict for ``:name``.
        block_rows: consecutive records read by one range query when a batch's rows
            are concentrated (sequential reads, :meth:`SQLiteDataset.shuffle_sampler`).
        cache_bytes: the most this dataset's blocks (kept as columns) take in the
            decode cache of each process that reads it (default 256 MiB; see
            :func:`from_parquet`).

    Returns:
        An :class:`SQLiteDataset` whose records are dicts column -> value.

    Example:
        >>> import sqlite3, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.db")
        >>> with sqlite3.connect(path) as conn:
        ...     _ = conn.execute("CREATE TABLE t (x REAL)")
        ...     _ = conn.executemany("INSERT INTO t VALUES (?)", [(0.5,), (None,), (2.0,)])
        >>> conn.close()
        >>> ds = from_sqlite(path, "SELECT x FROM t WHERE x > ? ORDER BY x", (0,))
        >>> len(ds), [float(r["x"]) for r in ds.__getitems__([1, 0])]
        (2, [2.0, 0.5])

    Errors:
        ConfigError: a missing file, a file that is not a database, a table that does
            not exist (naming those that do), a query that fails (with SQLite's
            message), unsupported params, duplicate column names, a column whose
            values mix types or whose type cannot be told.
    """
    import sqlite3

    text = os.fspath(path)
    if not os.path.isfile(text):
        raise ConfigError(f"no such SQLite database file: {text!r}")
    if not isinstance(query_or_table, str) or not query_or_table.strip():
        raise ConfigError(f"query_or_table must be a table name or a query, got {query_or_table!r}")
    params = check_params(params)
    if not isinstance(block_rows, int) or isinstance(block_rows, bool) or block_rows < 1:
        raise ConfigError(f"block_rows must be an int >= 1, got {block_rows!r}")
    check_cache_bytes(cache_bytes)
    full = os.path.abspath(text)
    conn = _connect(full)
    try:
        try:
            tables = conn.execute(
                "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{text!r} is not an SQLite database: {exc}") from exc
        spec = query_or_table.strip().rstrip(";").strip()
        return _build(conn, full, spec, params, tables, block_rows, cache_bytes)
    finally:
        conn.close()


def _build(
    conn: sqlite3.Connection,
    path: str,
    spec: str,
    params: Params,
    tables: list[tuple[str, str]],
    block_rows: int,
    cache_bytes: int,
) -> SQLiteDataset:
    import sqlite3

    by_name = {name.lower(): (name, typ) for name, typ in tables}
    rowids: np.ndarray | None = None
    declared: dict[str, str] = {}
    if spec.lower() in by_name:
        name = by_name[spec.lower()][0]
        if params:
            raise ConfigError("params are for a query; a table name takes none")
        source = f"SELECT * FROM {quote(name)}"
        declared = {row[1]: row[2] for row in conn.execute(f"PRAGMA table_info({quote(name)})")}
    elif any(c.isspace() for c in spec):
        source = spec
    else:
        existing = ", ".join(repr(n) for n, _ in tables) or "none"
        raise ConfigError(
            f"the database {path!r} has no table or view {spec!r} (it has: {existing}); "
            "pass a table name or a SELECT query"
        )
    try:
        cursor = conn.execute(f"SELECT * FROM ({source}) LIMIT 0", params)
        columns = [d[0] for d in cursor.description]
        (length,) = conn.execute(f"SELECT count(*) FROM ({source})", params).fetchone()
    except (sqlite3.Error, ValueError) as exc:  # ValueError: several statements
        raise ConfigError(f"the query failed: {exc} (query: {spec})") from exc
    if len(set(columns)) != len(columns):
        dupes = sorted({c for c in columns if columns.count(c) > 1})
        raise ConfigError(f"the query gives columns {dupes} twice: name them apart with AS")
    kinds = column_kinds(conn, source, params, columns, [declared.get(c, "") for c in columns])
    rowid = rowid_name(columns) or "rowid"  # in a temporary table, never shadowed
    alias = None
    if declared and rowid_name(columns) and by_name[spec.lower()][1] == "table":
        table = quote(by_name[spec.lower()][0])
        try:
            rowids = _rowids(conn, table, rowid, length)
            source = table
            alias = rowid_alias(conn, table)
        except sqlite3.OperationalError:  # WITHOUT ROWID: read it as a query
            rowids = None
    return SQLiteDataset(
        path,
        source,
        params,
        columns,
        kinds,
        length,
        rowids,
        rowid,
        alias,
        block_rows,
        cache_bytes,
    )
