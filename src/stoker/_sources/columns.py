"""Columns of a batch, as every table source hands them over.

A table source reads the rows of a batch in one call and returns them column by
column (``Columns``: name -> one of three column kinds), in the order asked for:

* a NumPy array of shape ``(rows, ...)``: numbers, booleans, dates; fixed-size lists
  are 2-D (or more);
* :class:`Ragged`: variable-length lists of numbers, one flat ``values`` array and
  ``offsets`` (``rows + 1`` of them), so a batch of token lists needs no Python
  object per row;
* a Python list: strings (``str``), binary (``bytes``), or other Python values.

From there, :func:`column_records` makes the records (dicts column -> value: numbers
as NumPy scalars, strings as ``str``, binary as ``bytes``, list columns as 1-D arrays)
and :func:`column_batch` the collated batch (dict column -> array, written into the
planned buffers), exactly what ``default_collate`` of those records would give.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

__all__ = [
    "Columns",
    "Ragged",
    "column_batch",
    "column_records",
    "columns_nbytes",
]


class Ragged:
    """Variable-length rows: row ``i`` is ``values[offsets[i]:offsets[i + 1]]``.

    A batch gathered from several blocks may be made :meth:`of_pieces`: its rows stay
    views of those blocks until ``values`` is first read (then they are concatenated
    once), so that a reader that copies every row anyway (padding) copies it once.

    Example:
        >>> import numpy as np
        >>> col = Ragged(np.array([1, 2, 3]), np.array([0, 2, 2, 3]))
        >>> [r.tolist() for r in col.rows()], col.lengths().tolist()
        ([[1, 2], [], [3]], [2, 0, 1])
        >>> lazy = Ragged.of_pieces([np.array([4, 5]), np.array([6])])
        >>> lazy.values.tolist(), lazy.offsets.tolist()
        ([4, 5, 6], [0, 2, 3])
    """

    __slots__ = ("_pieces", "_values", "offsets")

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self._values: np.ndarray | None = values
        self._pieces: list[np.ndarray] | None = None
        self.offsets = offsets

    @classmethod
    def of_pieces(cls, pieces: list[np.ndarray]) -> Ragged:
        """The rows ``pieces`` (at least one, 1-D, one dtype), not copied until
        ``values`` is read."""
        ends = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pieces], out=ends[1:])
        column = cls(pieces[0][:0], ends)
        column._values, column._pieces = None, pieces
        return column

    @property
    def values(self) -> np.ndarray:
        """Every row's values, end to end (rows from :meth:`of_pieces` joined on first use)."""
        if self._values is None:
            self._values = np.concatenate(self._pieces or [])
            self._pieces = None
        return self._values

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the values."""
        if self._pieces is not None:
            return self._pieces[0].dtype
        return self.values.dtype

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return f"Ragged(rows={len(self)}, dtype={self.dtype})"

    def lengths(self) -> np.ndarray:
        """The length of every row (int64)."""
        return np.diff(self.offsets).astype(np.int64, copy=False)

    def rows(self) -> list[np.ndarray]:
        """Every row as a 1-D array (views of ``values``)."""
        values, bounds = self.values, (self.offsets - self.offsets[0]).tolist()
        return [values[a:b] for a, b in itertools.pairwise(bounds)]

    def pieces(self) -> list[np.ndarray]:
        """Every row as a 1-D array to read (and copy) only: for rows made
        :meth:`of_pieces`, views of the blocks they were gathered from (read-only
        maps, or a cache's arrays: never hand them out or write to them)."""
        if self._pieces is not None:
            return self._pieces
        return self.rows()


Column = np.ndarray | Ragged | list[Any]
Columns = dict[str, Column]


def _values(column: Column) -> list[Any]:
    if isinstance(column, Ragged):
        return column.rows()
    if isinstance(column, np.ndarray):
        return list(column)  # NumPy scalars (or row arrays for 2-D columns)
    return column


def column_records(columns: Columns) -> list[dict[str, Any]]:
    """The records (one dict per row) of a batch's columns.

    Example:
        >>> import numpy as np
        >>> recs = column_records({"id": np.array([7, 8]), "text": ["a", "b"]})
        >>> [(int(r["id"]), r["text"]) for r in recs]
        [(7, 'a'), (8, 'b')]
    """
    names = list(columns)
    values = [_values(columns[n]) for n in names]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def column_batch(columns: Columns, out: Any = None) -> Any:
    """The collated batch of a batch's columns, or ``NotImplemented`` when a list column
    has rows of different lengths (only the record path can report that, or pad it).

    Array columns are copied into ``out`` (the planned buffers) when it fits, else into
    fresh arrays that own their memory (so the buffer pool can recycle them).

    Example:
        >>> import numpy as np
        >>> tokens = Ragged(np.arange(4), np.array([0, 2, 4]))
        >>> batch = column_batch({"x": np.array([1.0, 2.0]), "t": tokens})
        >>> batch["x"].tolist(), batch["t"].tolist()
        ([1.0, 2.0], [[0, 1], [2, 3]])
    """
    batch: dict[str, Any] = {}
    for name, column in columns.items():
        if isinstance(column, list):
            batch[name] = column
            continue
        if isinstance(column, Ragged):
            lengths = column.lengths()
            if len(lengths) and (lengths != lengths[0]).any():
                return NotImplemented
            start = int(column.offsets[0]) if len(column.offsets) else 0
            width = int(lengths[0]) if len(lengths) else 0
            stop = start + width * len(lengths)
            column = column.values[start:stop].reshape(len(lengths), width)
        target = out.get(name) if isinstance(out, dict) else None
        if (
            isinstance(target, np.ndarray)
            and target.shape == column.shape
            and target.dtype == column.dtype
        ):
            np.copyto(target, column)
            batch[name] = target
        else:
            batch[name] = np.array(column, copy=True, order="C")
    return batch


def columns_nbytes(columns: Columns) -> int:
    """About how much memory ``columns`` hold (strings and bytes: their lengths + 50 each,
    estimated from a sample of 64 values in longer lists).

    Example:
        >>> import numpy as np
        >>> columns_nbytes({"x": np.zeros(4, np.int64), "s": ["ab", "c"]})
        135
    """
    total = 0
    for column in columns.values():
        if isinstance(column, Ragged):
            total += column.values.nbytes + column.offsets.nbytes
        elif isinstance(column, np.ndarray) and column.dtype != object:
            total += column.nbytes
        else:
            total += _list_nbytes(column)
    return total


_SAMPLE = 64


def _list_nbytes(column: list[Any] | np.ndarray) -> int:
    """50 bytes a value plus the lengths of strings and bytes: exact up to 64 values,
    else estimated from 64 evenly spaced ones (a whole block is too slow to measure)."""
    n = len(column)
    sample = column if n <= _SAMPLE else column[:: n // _SAMPLE][:_SAMPLE]
    sized = sum(len(v) for v in sample if isinstance(v, str | bytes))
    return 50 * n + (sized if n <= _SAMPLE else sized * n // len(sample))
