"""``ArrowBlocks``: an Arrow table (in memory or memory-mapped) on the block protocol.

An Arrow table is already decoded, in chunks (record batches). ``Table.take`` of a
few rows spread over many chunks joins the chunks it reads first (tens of
milliseconds a batch on a table of a thousand chunks, a second with a large string
column), so a shuffled batch is read chunk by chunk instead: the batch's rows are
grouped by the chunk they lie in, each group taken from its chunk, and the pieces
joined (the size of the batch, not of the table). Blocks of consecutive rows, up to
``BLOCK_ROWS``, are slices of the table converted once to NumPy columns and kept in
the process's decode cache, for sequential reads and :meth:`shuffle_sampler`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .blocks import BlockTable
from .columns import Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .row_layout import stack_columns

__all__ = ["BLOCK_ROWS", "ArrowBlocks", "Chunks", "take_rows"]

BLOCK_ROWS = 65_536
"""The most rows in one block of an Arrow table."""


class Chunks:
    """A table's record batches and the row each starts at, listed once."""

    __slots__ = ("batches", "bounds", "table")

    def __init__(self, table: Any) -> None:
        self.table = table
        self.batches = table.to_batches()
        self.bounds = np.zeros(len(self.batches) + 1, dtype=np.int64)
        np.cumsum([b.num_rows for b in self.batches], out=self.bounds[1:])


def take_rows(chunks: Chunks, rows: np.ndarray) -> Any:
    """``table.take(rows)``, taken chunk by chunk (see the module docstring).

    Example:
        >>> import pyarrow as pa, numpy as np
        >>> t = pa.concat_tables([pa.table({"x": [1, 2]}), pa.table({"x": [3, 4]})])
        >>> take_rows(Chunks(t), np.array([3, 0, 2])).column("x").to_pylist()
        [4, 1, 3]
    """
    from .arrow_columns import pa

    table, batches, bounds = chunks.table, chunks.batches, chunks.bounds
    if len(batches) <= 1:
        return table.take(pa.array(rows))
    chunk_of = np.searchsorted(bounds, rows, side="right") - 1
    order = np.argsort(chunk_of, kind="stable")
    grouped = chunk_of[order]
    pieces = []
    edges = np.flatnonzero(np.diff(grouped)) + 1
    for part in np.split(np.arange(len(rows)), edges):
        if len(part):
            chunk = int(grouped[part[0]])
            local = rows[order[part]] - bounds[chunk]
            pieces.append(batches[chunk].take(pa.array(local)))
    joined = pa.Table.from_batches(pieces, schema=table.schema).combine_chunks()
    back = np.empty_like(order)
    back[order] = np.arange(len(rows))
    return joined.take(pa.array(back))


class ArrowBlocks(BlockTable):
    """Rows of an Arrow table read on the block protocol: a subclass provides the
    table (:meth:`_arrow_table`, only the columns read) and, when its records are not
    the table's rows in order, :meth:`_table_rows` (record -> table row)."""

    _reads_rows: ClassVar[bool] = True
    _handle_per_thread: ClassVar[bool] = False  # the handle: the table's chunks, listed once
    _block_unit: ClassVar[str] = "table slices"

    def _open_handle(self) -> Chunks:
        return Chunks(self._arrow_table())

    def _arrow_blocks(self, length: int, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        """Blocks of ``BLOCK_ROWS`` records (the last one shorter) over ``length``."""
        sizes = [BLOCK_ROWS] * (length // BLOCK_ROWS)
        self._set_blocks(sizes + [length % BLOCK_ROWS] * bool(length % BLOCK_ROWS), cache_bytes)
        self._block_rows = BLOCK_ROWS

    def _arrow_table(self) -> Any:
        raise NotImplementedError

    def _table_rows(self, indices: np.ndarray) -> np.ndarray | None:
        """The table rows of records ``indices`` (None: the same numbers)."""
        return None

    def _read_rows(self, indices: np.ndarray) -> Columns:
        from .arrow_columns import table_columns

        rows = self._table_rows(indices)
        return table_columns(take_rows(self._handle(), indices if rows is None else rows))

    def _read_block(self, block: int) -> Columns:
        from .arrow_columns import table_columns

        lo, hi = int(self._starts[block]), int(self._starts[block + 1])
        rows = self._table_rows(np.arange(lo, hi))
        chunks: Chunks = self._handle()
        piece = chunks.table.slice(lo, hi - lo) if rows is None else take_rows(chunks, rows)
        return stack_columns(table_columns(piece))
