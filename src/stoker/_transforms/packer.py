"""``Packer``: first fit of variable-length records into the rows of one batch.

The machinery behind :func:`~stoker.pack` (``_transforms/pack.py``): a
:class:`Packer` puts each record, in sampler order, into the first of the batch's
rows with room for it and writes the rows' token fields, ``segment_ids`` and
``positions``; a :class:`PackChunk` is a chunk of a table source's records that also
carries its list columns' values and offsets, so that first fit runs over the
chunk's lengths and each record is written with one slice copy per field;
:class:`PackedRows` is a packed batch seen as rows.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, Protocol, overload

import numpy as np

from .._context import SKIP, Skip
from ..errors import CollateError, ConfigError

__all__ = [
    "OVERFLOWS",
    "POSITIONS",
    "SEGMENT_IDS",
    "PackChunk",
    "PackedRows",
    "Packer",
    "Row",
    "Run",
    "checked_length",
]

SEGMENT_IDS = "segment_ids"
POSITIONS = "positions"
OVERFLOWS = ("truncate", "split")

Row = dict[str, np.ndarray]

_COUNTING: dict[int, np.ndarray] = {}


def _counting(length: int) -> np.ndarray:
    """``np.arange(length, dtype=np.int32)``, made once per length (read-only)."""
    counting = _COUNTING.get(length)
    if counting is None:
        counting = np.arange(length, dtype=np.int32)
        counting.flags.writeable = False
        _COUNTING[length] = counting
    return counting


def checked_length(length: object) -> int:
    if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
        raise ConfigError(f"pack() needs a length that is an int >= 1, got {length!r}")
    return int(length)


class _Buffer:
    """A 1-D array and a memoryview of it (for fast slice copies between same formats)."""

    __slots__ = ("array", "view")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.view = array.data


def _copy_pair(out: _Buffer, source: np.ndarray) -> tuple[Any, Any]:
    """(target, source) to copy ``source``'s slices into ``out``: memoryviews when both
    hold the same format, else the arrays (NumPy then casts)."""
    view = source.data
    if view.format == out.view.format and view.itemsize == out.view.itemsize:
        return out.view, view
    return out.array, source


_SEGMENT_FILLS: dict[int, list[memoryview]] = {}
_FILLED_SEGMENTS = 64  # segment numbers kept as filled rows, for rows of up to...
_FILLED_LENGTH = 1 << 14  # ... this many tokens (64 x 16,384 int32: 4 MiB)


def _segment_fills(length: int) -> list[memoryview]:
    """Row ``g`` (1 <= g < 64) of ``length`` int32 values ``g``, as memoryviews (none
    for very long rows: segment ids are then written by NumPy)."""
    fills = _SEGMENT_FILLS.get(length)
    if fills is None:
        if length > _FILLED_LENGTH:
            fills = []
        else:
            rows = np.repeat(np.arange(_FILLED_SEGMENTS, dtype=np.int32)[:, None], length, axis=1)
            rows.flags.writeable = False
            fills = [row.data for row in rows]
        _SEGMENT_FILLS[length] = fills
    return fills


class PackChunk(list[Row | Skip]):
    """The checked records of one chunk, that also carry their fields column by column.

    A list of records (dicts field -> 1-D array, views of the columns) like any other
    chunk; the columns (``arrays``: one flat array per field, in the order of
    ``fields``; record ``k`` is ``arrays[f][starts[k]:starts[k] + lengths[k]]``) let
    a :class:`Packer` place the chunk's records without looking at the dicts. Made by
    :class:`PackDataset` from a table source's list columns. Pickled as its columns
    only (the records are made again on the other side).

    Example:
        >>> import numpy as np
        >>> chunk = PackChunk(("tokens",), (np.arange(5),), [0, 2], [2, 3])
        >>> [r["tokens"].tolist() for r in chunk], chunk.lengths
        ([[0, 1], [2, 3, 4]], [2, 3])
    """

    def __init__(
        self,
        fields: tuple[str, ...],
        arrays: tuple[np.ndarray, ...],
        starts: list[int],
        lengths: list[int],
    ) -> None:
        if len(fields) == 1:  # (a list comprehension: twice as fast as a generator here)
            (f,), (a,) = fields, arrays
            super().__init__([{f: a[s : s + n]} for s, n in zip(starts, lengths, strict=True)])
        else:
            named = list(zip(fields, arrays, strict=True))
            super().__init__(
                [{f: a[s : s + n] for f, a in named} for s, n in zip(starts, lengths, strict=True)]
            )
        self.fields = fields
        self.arrays = arrays
        self.starts = starts
        self.lengths = lengths

    def __reduce__(self) -> tuple[Any, ...]:
        return PackChunk, (self.fields, self.arrays, self.starts, self.lengths)


Piece = tuple[tuple[np.ndarray, ...], int, int]  # (an array per field, start, tokens)


class Run(Protocol):
    """Records read in sampler order (``SKIP`` for removed ones), their epoch and
    sample indices, and how many of them were taken already (``start``)."""

    records: Sequence[Any]
    epoch: int
    indices: Sequence[int]
    start: int


class PackedRows(Sequence[Row]):
    """The rows of one packed batch: row ``i`` is ``{name: batch[name][i]}``.

    ``batch`` is the whole batch, a dict of 2-D arrays (the packed fields, then
    ``"segment_ids"`` and ``"positions"``): what ``default_collate`` makes of the rows.

    Example:
        >>> import numpy as np
        >>> rows = PackedRows({"tokens": np.array([[1, 2], [3, 0]])})
        >>> len(rows), rows[1]["tokens"].tolist()
        (2, [3, 0])
    """

    def __init__(self, batch: dict[str, np.ndarray]) -> None:
        self.batch = batch
        self._count = len(next(iter(batch.values()))) if batch else 0

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(f"row {index} of a batch of {self._count} rows")
        return {name: a[index] for name, a in self.batch.items()}


class Packer:
    """Builds one batch of up to ``rows`` packed rows, first fit, from records in order.

    ``add(record, epoch, index)`` puts a record (a dict of 1-D arrays) into the first
    row with room and returns True, or returns False (taking nothing) when no row has
    room: the batch is complete. ``add_from(run)`` adds a run of records in order the
    same way, from ``run.start`` on, and advances ``run.start`` past those it took
    (a :class:`PackChunk` is placed from its columns). ``take()``
    returns the rows and the (epoch, index) of every record in them, and starts an
    empty batch; ``collated`` is then the rows' batch (a dict of 2-D arrays). ``full``
    is True when no record could be added any more; ``chunk`` is how many records the
    loader reads at a time for it.

    Example:
        >>> import numpy as np
        >>> p = Packer(4, ("tokens",), {"tokens": 0}, rows=1)
        >>> p.add({"tokens": np.array([1, 2])}, 0, 0), p.add({"tokens": np.array([3, 4, 5])}, 0, 1)
        (True, False)
        >>> rows, taken = p.take()
        >>> rows[0]["tokens"].tolist(), taken, p.collated["segment_ids"].tolist()
        ([1, 2, 0, 0], [(0, 0)], [[1, 1, 0, 0]])
    """

    def __init__(
        self,
        length: int,
        fields: tuple[str, ...],
        fills: dict[str, Any],
        rows: int,
        *,
        split: bool = False,
    ) -> None:
        self._length = length
        self._fields = fields
        self._fills = fills
        self._rows = rows
        self._split = split
        self._collated: dict[str, np.ndarray] | None = None
        self._reset()

    def _reset(self) -> None:
        self._free: list[int] = []  # room left in each open row
        self._pieces: list[list[Piece]] = []  # the pieces in each open row, in order
        self._taken: list[tuple[int, int]] = []

    @property
    def full(self) -> bool:
        return len(self._free) == self._rows and not any(self._free)

    @property
    def chunk(self) -> int:
        """How many records to read at a time: two per row (rows hold a few records),
        which keeps a read small enough for a table source to copy row by row."""
        return 2 * self._rows

    @property
    def collated(self) -> dict[str, np.ndarray] | None:
        """The batch of the rows ``take()`` returned last (None before, or when empty)."""
        return self._collated

    def add(self, record: Row, epoch: int, index: int) -> bool:
        arrays = tuple(record[f] for f in self._fields)
        return self._add(arrays, 0, len(arrays[0]), epoch, index)

    def add_from(self, run: Run) -> bool:
        """Add the records of ``run`` from ``run.start`` on, in order, until one fits in
        no row, advancing ``run.start`` past each record taken (so it is exact even when
        a record raises); True when the run was taken to its end. A ``SKIP`` is passed
        over, as taken; nothing is taken once the batch is ``full``."""
        records = run.records
        if isinstance(records, PackChunk):
            return self._add_chunk(records, run)
        epoch, indices = run.epoch, run.indices
        for k in range(run.start, len(records)):
            if self.full:
                return False
            record = records[k]
            if record is not SKIP and not self.add(record, epoch, indices[k]):
                return False
            run.start = k + 1
        return True

    def _add_chunk(self, chunk: PackChunk, run: Run) -> bool:
        # add() for every record, inlined: this loop runs once per record of the epoch.
        arrays, starts, lengths = chunk.arrays, chunk.starts, chunk.lengths
        epoch, indices = run.epoch, run.indices
        length, rows = self._length, self._rows
        free, pieces, taken = self._free, self._pieces, self._taken
        end = len(lengths)
        k = run.start
        try:
            while k < end:
                n = lengths[k]
                if n == 0 or n > length:  # nothing to place, or a record to split
                    if n == 0 and self.full:
                        return False
                    if not self._add(arrays, starts[k], n, epoch, indices[k]):
                        return False
                    k += 1
                    continue
                for row, room in enumerate(free):  # noqa: B007 (row: the one found, after break)
                    if room >= n:
                        break
                else:
                    if len(free) == rows:
                        return False
                    row = len(free)
                    free.append(length)
                    pieces.append([])
                pieces[row].append((arrays, starts[k], n))
                free[row] -= n
                taken.append((epoch, indices[k]))
                k += 1
            return True
        finally:
            run.start = k

    def _add(
        self, arrays: tuple[np.ndarray, ...], start: int, n: int, epoch: int, index: int
    ) -> bool:
        length = self._length
        if n == 0:  # nothing to place: consumed all the same
            self._taken.append((epoch, index))
            return True
        if n <= length:  # first fit, then place
            row = self._fit(n)
            if row < 0:
                return False
            self._place(row, (arrays, start, n))
        else:  # overflow="split" (records were truncated otherwise)
            whole, rest = divmod(n, length)
            if whole + (rest > 0) > self._rows:
                raise CollateError(
                    f"a record of {n} tokens needs {whole + (rest > 0)} rows of "
                    f"{length}, more than a batch of {self._rows} rows: use a larger "
                    "batch_size or length, or overflow='truncate'"
                )
            if len(self._free) + whole > self._rows:
                return False
            for k in range(whole):  # full pieces each fill a new row
                self._free.append(length)
                self._place(len(self._free) - 1, (arrays, start + k * length, length))
            if rest:
                row = self._fit(rest)
                if row < 0:  # all rows taken: the pieces so far go back, the record waits
                    del self._free[len(self._free) - whole :]
                    del self._pieces[len(self._pieces) - whole :]
                    return False
                self._place(row, (arrays, start + whole * length, rest))
        self._taken.append((epoch, index))
        return True

    def _fit(self, n: int) -> int:
        """The first row with room for ``n`` tokens (opening one if allowed), or -1."""
        for row, free in enumerate(self._free):
            if free >= n:
                return row
        if len(self._free) < self._rows:
            self._free.append(self._length)
            return len(self._free) - 1
        return -1

    def _place(self, row: int, piece: Piece) -> None:
        if row == len(self._pieces):
            self._pieces.append([])
        self._pieces[row].append(piece)
        self._free[row] -= piece[2]

    def take(self) -> tuple[Sequence[Row], list[tuple[int, int]]]:
        pieces, taken = self._pieces, self._taken
        self._reset()
        if not pieces:
            self._collated = None
            return [], taken
        batch = self._write(pieces)
        self._collated = batch
        return PackedRows(batch), taken

    def _write(self, pieces: list[list[Piece]]) -> dict[str, np.ndarray]:
        """The batch of the rows ``pieces``: one slice copy per piece and field."""
        length, nrows, fields = self._length, len(pieces), self._fields
        sources = {id(p[0]): p[0] for row in pieces for p in row}  # a chunk's arrays once
        batch: dict[str, np.ndarray] = {}
        for i, f in enumerate(fields):
            dtype = np.result_type(*{arrays[i].dtype for arrays in sources.values()})
            try:
                batch[f] = np.full((nrows, length), self._fills[f], dtype=dtype)
            except (OverflowError, TypeError, ValueError) as exc:
                raise CollateError(
                    f"cannot pad {f!r} with {self._fills[f]!r}: {exc}; choose a pad_value "
                    f"that {np.dtype(dtype)} can hold"
                ) from exc
        segment_ids = np.zeros((nrows, length), dtype=np.int32)
        positions = np.zeros((nrows, length), dtype=np.int32)
        # Each piece is one run of a row: one slice assignment per piece and field into
        # the flat batch, at copy speed, with no masks or index arrays. Between buffers
        # of one format, a memoryview's slice assignment costs half of NumPy's.
        outs = [_Buffer(batch[f].reshape(-1)) for f in fields]
        segs = _Buffer(segment_ids.reshape(-1))
        poss = _Buffer(positions.reshape(-1))
        counting = _Buffer(_counting(length)).view
        seg_fills = _segment_fills(length)
        filled = len(seg_fills)
        seg_view, seg_array, pos_view = segs.view, segs.array, poss.view
        copies: dict[int, list[tuple[Any, Any]]] = {}  # id(arrays) -> (target, source) each
        last: tuple[np.ndarray, ...] | None = None
        pairs: list[tuple[Any, Any]] = []
        for r, row in enumerate(pieces):
            at = r * length
            for segment, (arrays, start, n) in enumerate(row, 1):
                stop = at + n
                if arrays is not last:  # a chunk's pieces share their arrays
                    last = arrays
                    found = copies.get(id(arrays))
                    if found is None:
                        found = copies[id(arrays)] = [
                            _copy_pair(out, a) for out, a in zip(outs, arrays, strict=True)
                        ]
                    pairs = found
                for target, source in pairs:
                    target[at:stop] = source[start : start + n]
                if segment < filled:
                    seg_view[at:stop] = seg_fills[segment][:n]
                else:
                    seg_array[at:stop] = segment
                pos_view[at:stop] = counting[:n]
                at = stop
        batch[SEGMENT_IDS] = segment_ids
        batch[POSITIONS] = positions
        return batch
